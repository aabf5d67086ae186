"""The Discord streaming preview: `DiscordReplyStream` shows a reply while the model writes
it, as one message posted and then edited in place, finalised into the first chunk.

Discord allows about five edits of a channel's messages per five seconds; the preview is
edited at most once per `stream_interval` (1.2 s by default), so a reply streaming in two
chats of one channel still stays inside that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

from channels.base import ChatRef
from channels.discord.delivery import DiscordDelivery, DiscordDeliveryError, render_chunks
from channels.discord.inbound import Spawn

log = logging.getLogger("channels.discord")


class DiscordReplyStream:
    """One preview message, edited at most once per `stream_interval`, finalised in place.

    `update` never waits for Discord: the latest text is kept and a background task posts or
    edits it, trailing edge included. `finish` waits for that task, edits the preview into the
    first chunk of the final text and posts any further chunks after it.
    """

    def __init__(self, delivery: DiscordDelivery, chat: ChatRef, spawn: Spawn) -> None:
        self._delivery = delivery
        self._chat = chat
        self._spawn = spawn
        self._limit = delivery.options.chunk_limit
        self.interval = delivery.options.stream_interval
        self._latest = ""
        self._shown = ""
        self._message_id: int | None = None
        self._broken = False
        self._done = False
        self._last_flush = -math.inf
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def update(self, text: str) -> None:
        if self._done or self._broken or not text.strip():
            return
        chunks = render_chunks(text, self._limit)
        if not chunks:
            return
        self._latest = chunks[0]
        if self._task is None or self._task.done():
            self._task = self._spawn(self._flush_loop(), "discord-stream-preview")

    async def finish(self, text: str) -> None:
        if self._done:
            return
        await self._settle()
        chunks = render_chunks(text, self._limit) if text.strip() else []
        delivery, chat = self._delivery, self._chat
        if not chunks:
            if self._message_id is not None:
                await delivery.delete(chat, self._message_id)
            return
        async with delivery.chat_lock(chat):
            if self._message_id is None:
                await delivery.post_chunks(chat, chunks)
                return
            try:
                if chunks[0] != self._shown:
                    await delivery.edit(chat, self._message_id, chunks[0])
            except DiscordDeliveryError as exc:
                log.warning("discord: finalising the preview failed (%s); posting anew", exc)
                await delivery.delete(chat, self._message_id)
                await delivery.post_chunks(chat, chunks)
                return
            for chunk in chunks[1:]:
                await delivery.post(chat, chunk, reply=False)

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
                if self._message_id is None:
                    async with self._delivery.chat_lock(self._chat):
                        self._message_id = await self._delivery.post(self._chat, text, reply=True)
                else:
                    await self._delivery.edit(self._chat, self._message_id, text)
                self._shown = text
            except DiscordDeliveryError as exc:
                log.warning("discord: streaming preview stopped: %s", exc)
                self._broken = True
            self._last_flush = time.monotonic()
