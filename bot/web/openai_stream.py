"""What an API stream shows of a run while it runs: its text, cleaned as a chat's preview is.

`StreamedText.on_event` is the run's progress callback (the turn's `watch`). Each model
call's deltas are cleaned with `bot.kernel.delivery.preview_text` (never more than the final reply
would show: no half-written NO_REPLY, no open tag, no marker line), and only what extends
what was already sent goes out, as pieces on `queue`. A call that ends in tool calls keeps
what it showed; the next call's text follows after a blank line. `rest(final)` is what is
left to send of the cleaned final reply once the run is over (nothing, when the stream
already showed something the final reply does not continue).
"""

from __future__ import annotations

import asyncio

from agents.loop_events import Event, ModelCallFinished, TextDelta
from bot.kernel.delivery import clean_reply, preview_text


class StreamedText:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self._call = ""  # the raw text of the model call being streamed
        self._shown = ""  # what of it was sent (cleaned)
        self._anything = False  # some text went out (a later call starts after a blank line)
        self._fresh = False  # the call being streamed began after another's text
        self._ended = ""  # what was sent of the last model call that finished

    async def on_event(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self._call += event.text
            self._offer(preview_text(self._call))
        elif isinstance(event, ModelCallFinished):
            self._offer(preview_text(event.text))
            self._ended = self._shown
            self._call, self._shown = "", ""
            self._fresh = self._anything

    def _offer(self, clean: str) -> None:
        if len(clean) <= len(self._shown) or not clean.startswith(self._shown):
            return
        piece = clean[len(self._shown) :]
        if not self._shown and self._fresh:
            piece = "\n\n" + piece
        self._shown = clean
        self._anything = True
        self.queue.put_nowait(piece)

    def rest(self, final: str) -> str:
        """What is left to send of the run's final reply `final` (raw model text)."""
        clean = clean_reply(final)
        shown = self._shown or self._ended
        if not shown:  # the last call showed nothing yet: all of it, after earlier calls' text
            return "\n\n" + clean if self._anything and clean else clean
        return clean[len(shown) :] if clean.startswith(shown) else ""
