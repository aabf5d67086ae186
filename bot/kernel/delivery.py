"""The one road from model text to a chat: clean -> silent rules -> render -> chunk -> send.

Every text a model wrote reaches a user through this module: a turn's final reply and its
streamed preview (`TurnReply`), cron results, heartbeat messages and the `message` tool
(`send_reply`). Sub-agent results are announced as turns of the parent session, so they take
the turn path too. Texts the daemon writes itself (pairing codes, "Stopped.", notices) are not
model output and go to `Channel.send` directly.

The stages, in order:
1. clean: `agents.sanitize.sanitize_output` (thinking blocks, tool-call debris, echoed system
   messages, stutter);
2. silent rules: a reply that is exactly NO_REPLY is dropped, a NO_REPLY at its start or end
   is cut off; for heartbeats also HEARTBEAT_OK (`strip_heartbeat_ok`, up to 300 characters
   may accompany it and still be dropped). What is left empty is not sent;
3. render and 4. chunk: the platform adapter, behind `Channel.send` / `ReplyStream.finish`
   (its own markup from the Markdown, split at the platform's length limit);
5. send, with the adapter's retries on the platform's rate limits.

Previews follow the same rules. `preview_text(partial)` is what a preview may show of a reply
still being written: the cleaned text minus what may still turn into something the final
reply would not show (a line that may be a `[Tool call: ...]` or `<tool_call>` marker, a tag
being written, a partial NO_REPLY/HEARTBEAT_OK at the start, or a partial NO_REPLY at the
end). Cleaning costs time linear in the text, so `Preview` cleans at most once per the
stream's own edit interval (`ReplyStream.interval`; never for streams that show no preview)
and once more when a model call ends: per turn the cost stays about the reply's length times
its duration in edit intervals, however many deltas the model sends. No preview is shown
before `gateway.preview_after` (1 s): a reply done sooner is one message, not a message and
an edit (under a burst, previews doubled the platform calls that its pace allows).

A cancelled turn (`/stop`) leaves no raw text: the preview is edited to the cleaned partial
text, or deleted when nothing of it would be shown. A silent final reply deletes its preview.
Each text handed to the platform is one `telemetry.send(channel)` (a counted send, and a
span of the turn's trace). A final reply to be spoken (`agent.voice`) is handed, cleaned, to
the turn's `SpokenReply` (`bot/media/voice_reply.py`); when it sends nothing, the text goes
as usual.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

from agents.loop_events import Event, ModelCallFinished, TextDelta, ToolProgress, ToolStarted
from agents.model import Message
from agents.sanitize import (
    HEARTBEAT_TOKEN,
    SILENT_TOKEN,
    SilentTokenFilter,
    is_silent,
    sanitize_output,
    strip_heartbeat_ok,
    strip_silent_token,
)
from bot.observe.telemetry import OFF, Telemetry
from channels.base import Channel, ChatRef, Outbound, ReplyStream, ShowsTools
from markup.fences import fenced_blocks

log = logging.getLogger(__name__)

ReplyKind = Literal["reply", "heartbeat"]
MAX_OK_REST = 300  # chars that may accompany HEARTBEAT_OK and still be dropped
# The most of one reply a chat receives: about 25 messages of 4,096 characters, well above
# what a model writes within its default `max_tokens` (8,192, some 35,000 characters). A
# model that runs on (a looping local model, a server that ignores max_tokens) cannot flood
# a chat with hundreds of messages.
MAX_REPLY_CHARS = 100_000

# Line markers the sanitizer removes with what follows them; a last line that is still the
# beginning of one is held until it is complete.
_MARKERS = ("[tool call:", "[tool result", "[historical context:", "[system message]")
# A tag still being written at the end of the text, or complete with nothing after it yet
# (`Sure <thi`, `Sure <think>`): whether it is structure depends on what follows.
_TAG_TAIL = re.compile(r"<(?:[/!]?[A-Za-z][\w:-]*(?:\s[^<>\n]*)?>?|[/!]?)[ \t]*\Z")
_WRAP = "*_~`"


class SpokenReply(Protocol):
    """A final reply spoken: True when it was sent (as a voice note and its text)."""

    async def speak(self, text: str, stream: ReplyStream) -> bool: ...


class DeliveryError(Exception):
    """A reply could not be delivered: the chat's channel is not running, or sending failed.

    `reason` is the cause alone (for callers that describe the chat their own way)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def clean_reply(text: str, kind: ReplyKind = "reply") -> str:
    """Stages 1 and 2: what of the model's `text` a user may see; "" means send nothing.
    A reply longer than `MAX_REPLY_CHARS` is cut (`cut_long_reply`)."""
    if is_silent(text):
        return ""
    clean = strip_silent_token(sanitize_output(text))
    if kind == "heartbeat":
        suppress, clean = strip_heartbeat_ok(clean, MAX_OK_REST)
        if suppress:
            return ""
    return cut_long_reply(clean) if clean.strip() else ""


def cut_long_reply(text: str, limit: int = MAX_REPLY_CHARS) -> str:
    """`text`, or when longer than `limit` its beginning (cut at a paragraph, line or word
    break), with a code block left open closed and a note of how much was left out."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    for sep in ("\n\n", "\n", " "):
        at = head.rfind(sep)
        if at > limit // 2:
            head = head[:at]
            break
    head = head.rstrip()
    left_out = len(text) - len(head)
    blocks = fenced_blocks(head)
    if blocks and not blocks[-1].closed:  # the cut falls inside a code block: close it
        head += "\n" + blocks[-1].fence.indent + blocks[-1].fence.marker
    return f"{head}\n\n[Reply cut: {left_out:,} more characters not sent.]"


def cut_long_texts(messages: list[Message]) -> list[Message]:
    """`messages` with every assistant text over `MAX_REPLY_CHARS` cut as its reply is, so
    the saved history holds what the chat received, not a runaway model's megabytes (which
    every later request of the session would carry). Others are returned as they are."""
    out: list[Message] = []
    for message in messages:
        blocks = message["content"]
        if message["role"] != "assistant" or not any(_too_long(b) for b in blocks):
            out.append(message)
            continue
        content: list[Any] = [_cut_block(b) if _too_long(b) else b for b in blocks]
        out.append({"role": "assistant", "content": content})
    return out


def _cut_block(block: Any) -> Any:
    return {**block, "text": cut_long_reply(block["text"])}


def _too_long(block: Any) -> bool:
    return block.get("type") == "text" and len(block.get("text", "")) > MAX_REPLY_CHARS


def preview_text(partial: str) -> str:
    """What a preview may show of `partial`, a reply still being written ("" for nothing).

    Never more than the final reply would show once the model goes on as it has begun: the
    cleaned text, holding back a last line that may become a marker line, a tag still open
    at the end, and a NO_REPLY (or HEARTBEAT_OK) that may be forming at the start or end.
    """
    start = partial.rfind("\n") + 1
    line = partial[start:].strip().lower()
    if line and any(marker.startswith(line) for marker in _MARKERS):
        partial = partial[:start]
    else:
        tail = _TAG_TAIL.search(partial, start)
        if tail is not None:
            partial = partial[: tail.start()]
    clean = sanitize_output(partial)
    if _may_become_token(clean):
        return ""
    filtered = SilentTokenFilter()  # holds a leading token and a trailing partial one
    return filtered.feed(clean).rstrip()


def _may_become_token(text: str) -> bool:
    """True while `text` is, wrappers aside, a beginning of NO_REPLY or HEARTBEAT_OK."""
    core = text.strip().strip(_WRAP)
    return core == "" or any(token.startswith(core) for token in (SILENT_TOKEN, HEARTBEAT_TOKEN))


async def send_reply(
    channels: Mapping[str, Channel],
    chat: ChatRef,
    text: str,
    *,
    kind: ReplyKind = "reply",
    telemetry: Telemetry = OFF,
) -> str:
    """The whole pipeline for a reply that is not streamed: clean, then send to `chat`.

    Returns the text sent ("" when the silent rules left nothing: nothing was sent).
    Raises `DeliveryError` when the chat's channel is not running or the platform refused.
    """
    clean = clean_reply(text, kind)
    if not clean:
        return ""
    channel = channels.get(chat.channel)
    where = describe_chat(chat)
    if channel is None:
        reason = f"channel {chat.channel} is not running"
        raise DeliveryError(f"cannot deliver to {where}: {reason}", reason)
    try:
        with telemetry.send(chat.channel):
            await channel.send(Outbound(chat, clean))
    except Exception as exc:
        raise DeliveryError(f"sending to {where} failed: {exc}", str(exc)) from exc
    return clean


def describe_chat(chat: ChatRef) -> str:
    """`<channel> dm <id>`, `<channel> group <id> thread <id>`: a chat as logs name it."""
    where = f"{chat.channel} {chat.kind} {chat.chat_id}"
    return f"{where} thread {chat.thread_id}" if chat.thread_id else where


class Preview:
    """Feeds a `ReplyStream` the cleaned text of the model call being streamed.

    `feed` keeps deltas and cleans the text so far at most once per `stream.interval`
    (the first delta shows at once; what arrives within the interval is shown when it is
    over, so a model that pauses mid-reply still has its text on screen); `call_ended`
    shows the call's whole text, then the next call's preview starts afresh. Nothing is prepared for a stream whose
    interval is infinite (a platform that cannot edit shows no preview).
    """

    def __init__(
        self,
        stream: ReplyStream,
        clock: Callable[[], float] = time.monotonic,
        first_after: float = 0.0,
    ) -> None:
        self._stream = stream
        self._every = stream.interval
        self._clock = clock
        self._parts: list[str] = []
        # Nothing is shown before `first_after` seconds: a reply done by then is sent once.
        self._due = clock() + first_after if first_after > 0 else -math.inf
        self._pending = False
        self._closed = False
        self._later: asyncio.Task[None] | None = None
        self.shown = ""  # the last text handed to the stream

    @property
    def enabled(self) -> bool:
        return not math.isinf(self._every)

    async def feed(self, delta: str) -> None:
        if not self.enabled:
            return
        self._parts.append(delta)
        now = self._clock()
        if now < self._due:
            self._pending = True  # shown by the next delta, or when the interval is over
            if self._later is None or self._later.done():
                self._later = asyncio.create_task(self._refresh_later(), name="preview")
            return
        self._due = now + self._every
        await self._show(preview_text(self._text()))

    async def call_ended(self, text: str) -> None:
        """A model call finished with `text`: show it (cleaned), then start afresh; before
        the first preview is due nothing is shown (the final reply, or the next call, will)."""
        if self._later is not None:
            self._later.cancel()
        early = not self.shown and self._clock() < self._due
        if self.enabled and not early and (self._pending or self._parts):
            await self._show(preview_text(text))
        self._parts = []
        self._pending = False

    def settled(self) -> str:
        """The cleaned text of the call being streamed now, else what was shown last."""
        self.close()
        return (preview_text(self._text()) if self._parts else "") or self.shown

    def close(self) -> None:
        """No more updates: cancel a trailing refresh still waiting."""
        self._closed = True
        if self._later is not None:
            self._later.cancel()

    async def _refresh_later(self) -> None:
        await asyncio.sleep(max(0.0, self._due - self._clock()))
        if self._pending and not self._closed:
            self._due = self._clock() + self._every
            await self._show(preview_text(self._text()))

    def _text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    async def _show(self, text: str) -> None:
        self._pending = False
        if text and text != self.shown and not self._closed:
            self.shown = text
            await self._stream.update(text)


class TurnReply:
    """One turn's reply to one chat: a preview while the model streams, then the final text."""

    def __init__(
        self,
        channel: Channel,
        chat: ChatRef,
        telemetry: Telemetry = OFF,
        preview_after: float = 0.0,  # no preview for a reply done sooner (gateway.preview_after)
        voice: SpokenReply | None = None,
    ) -> None:
        self.channel = channel
        self.chat = chat
        self.stream = channel.reply_stream(chat)
        self.preview = Preview(self.stream, first_after=preview_after)
        self.telemetry = telemetry
        self.voice = voice  # set when this reply is to be spoken

    def close(self) -> None:
        """The turn is over, however it ended: no preview refresh runs after this."""
        self.preview.close()

    async def on_event(self, event: Event) -> None:
        """The agent loop's progress callback."""
        if isinstance(event, TextDelta):
            await self.preview.feed(event.text)
        elif isinstance(event, ModelCallFinished):
            await self.preview.call_ended(event.text)
        elif isinstance(event, ToolStarted):
            log.debug("tool %s started", event.name)
            if isinstance(self.stream, ShowsTools):  # the console names the running tool
                await self.stream.tool(event.name)
        elif isinstance(event, ToolProgress) and isinstance(self.stream, ShowsTools):
            await self.stream.tool(event.name, event.fraction)  # "… running x (40%)"

    async def finish(self, text: str) -> bool:
        """Deliver the model's final `text` (cleaned, NO_REPLY honoured); True if sent.

        A silent reply deletes the preview, where the platform can."""
        self.preview.close()
        clean = clean_reply(text)
        if clean and self.voice is not None and await self.voice.speak(clean, self.stream):
            return True
        await self._finish(clean)
        return bool(clean)

    async def fail(self, message: str) -> None:
        """Replace the preview with a message of the daemon's own (a failed turn)."""
        self.preview.close()
        await self._finish(message)

    async def cancel(self) -> None:
        """The run was stopped: leave the cleaned partial text, or delete the preview.

        Nothing new is posted when no preview was shown."""
        settled = self.preview.settled()
        if not self.preview.shown:
            await self.stream.abort()
            return
        await self._finish(settled)

    async def _finish(self, text: str) -> None:
        if not text:  # deletes the preview, where there is one: nothing is sent
            await self.stream.finish(text)
            return
        with self.telemetry.send(self.chat.channel):
            await self.stream.finish(text)
