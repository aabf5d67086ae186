"""The Slack streaming preview: `SlackReplyStream` shows a reply while the model writes it,
as one message posted and then edited in place, finalised into the first chunk of the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any

from channels.base import ChatRef
from channels.chunking import split_markdown
from channels.slack.delivery import SlackDelivery, SlackDeliveryError

# One logger for the whole Slack adapter: log settings and records keep naming channels.slack.
log = logging.getLogger("channels.slack")


class SlackReplyStream:
    """One preview message, edited at most once per `stream_interval`, finalised in place.

    `update` never waits for Slack: the latest text is kept and a background task posts or
    edits it, trailing edge included. `finish` waits for that task, edits the preview into
    the first chunk of the final text and posts any further chunks after it. `spawn` starts
    the background task as one of the channel's, so the channel's `stop()` cancels it.
    """

    def __init__(
        self,
        delivery: SlackDelivery,
        chat: ChatRef,
        spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]],
    ) -> None:
        self._delivery = delivery
        self._chat = chat
        self._spawn = spawn
        self._limit = delivery.options.chunk_limit
        self.interval = delivery.options.stream_interval
        self._latest = ""
        self._shown = ""
        self._ts: str | None = None
        self._broken = False
        self._done = False
        self._last_flush = -math.inf
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def update(self, text: str) -> None:
        if self._done or self._broken or not text.strip():
            return
        self._latest = split_markdown(text, self._limit)[0]
        if self._task is None or self._task.done():
            self._task = self._spawn(self._flush_loop(), "slack-stream-preview")

    async def finish(self, text: str) -> None:
        if self._done:
            return
        await self._settle()
        chunks = split_markdown(text, self._limit) if text.strip() else []
        delivery, chat = self._delivery, self._chat
        if not chunks:
            if self._ts is not None:
                await delivery.delete(chat, self._ts)
            return
        async with delivery.chat_lock(chat):
            rest = chunks
            if self._ts is not None:
                try:
                    if chunks[0] != self._shown:
                        await delivery.edit(chat, self._ts, chunks[0])
                    rest = chunks[1:]
                except SlackDeliveryError as exc:
                    log.warning("slack: finalising the preview failed (%s); posting anew", exc)
                    await delivery.delete(chat, self._ts)
            for chunk in rest:
                await delivery.post(chat, chunk)

    async def abort(self) -> None:
        await self._settle()

    async def _settle(self) -> None:
        self._done = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait({self._task})

    async def _flush_loop(self) -> None:
        while not self._done and not self._broken and self._latest != self._shown:
            wait = self._last_flush + self.interval - time.monotonic()
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                continue
            text = self._latest
            try:
                if self._ts is None:
                    async with self._delivery.chat_lock(self._chat):
                        self._ts = await self._delivery.post(self._chat, text)
                else:
                    await self._delivery.edit(self._chat, self._ts, text)
                self._shown = text
            except SlackDeliveryError as exc:
                log.warning("slack: streaming preview stopped: %s", exc)
                self._broken = True
            self._last_flush = time.monotonic()
