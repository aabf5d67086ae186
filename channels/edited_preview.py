"""The streaming preview of platforms that edit a posted message in place (Slack, Discord).

Owns `EditedPreview`: a reply shown while the model writes it, as one message posted and then
edited at most once per `interval`, finalised into the first chunk of the answer with any
further chunks posted after it. A platform subclasses it with its own calls (`cut`,
`post_preview`, `edit`, `delete`, `post_chunks`, `chat_lock`) and the error its delivery
raises; the timing and the order of calls live here once. Telegram's preview, which also waits
out flood limits, is its own (`channels/telegram/stream.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

from channels.background import Spawn

MessageId = TypeVar("MessageId")


class EditedPreview(ABC, Generic[MessageId]):
    """One preview message, edited at most once per `interval`, finalised in place.

    `update` never waits for the platform: the latest text is kept and a background task
    (started by `spawn`, so the channel's `stop()` cancels it) posts or edits it, trailing
    edge included. A failed preview call stops the preview, never the turn. `finish` waits for
    that task, edits the preview into the first chunk of the final text (posting the whole
    answer afresh if that edit fails) and posts any further chunks after it; an empty final
    text deletes the preview.
    """

    platform = "chat"  # named in log lines
    error: type[Exception] = Exception  # what the platform's delivery raises

    def __init__(self, *, interval: float, spawn: Spawn, log: logging.Logger) -> None:
        self.interval = interval
        self._spawn = spawn
        self._log = log
        self._latest = ""
        self._shown = ""
        self._message: MessageId | None = None
        self._broken = False
        self._done = False
        self._last_flush = -math.inf
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @abstractmethod
    def cut(self, text: str) -> list[str]:
        """`text` rendered and cut into the platform's chunks (none for nothing to show)."""

    @abstractmethod
    def chat_lock(self) -> AbstractAsyncContextManager[Any]:
        """The lock that keeps this chat's posts in order."""

    @abstractmethod
    async def post_preview(self, text: str) -> MessageId:
        """Post the first preview; the id of the message to edit from then on."""

    @abstractmethod
    async def edit(self, message: MessageId, text: str) -> None: ...

    @abstractmethod
    async def delete(self, message: MessageId) -> None: ...

    @abstractmethod
    async def post_chunks(self, chunks: list[str], *, first: bool) -> None:
        """Post `chunks` in order; `first`: they begin the answer (no preview holds it)."""

    async def update(self, text: str) -> None:
        if self._done or self._broken or not text.strip():
            return
        chunks = self.cut(text)
        if not chunks:
            return
        self._latest = chunks[0]
        if self._task is None or self._task.done():
            self._task = self._spawn(self._flush_loop(), f"{self.platform}-stream-preview")

    async def finish(self, text: str) -> None:
        if self._done:
            return
        await self._settle()
        chunks = self.cut(text) if text.strip() else []
        if not chunks:
            if self._message is not None:
                await self.delete(self._message)
            return
        async with self.chat_lock():
            if self._message is None:
                await self.post_chunks(chunks, first=True)
                return
            try:
                if chunks[0] != self._shown:
                    await self.edit(self._message, chunks[0])
            except self.error as exc:
                self._log.warning(
                    "%s: finalising the preview failed (%s); posting anew", self.platform, exc
                )
                await self.delete(self._message)
                await self.post_chunks(chunks, first=True)
                return
            await self.post_chunks(chunks[1:], first=False)

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
                if self._message is None:
                    async with self.chat_lock():
                        self._message = await self.post_preview(text)
                else:
                    await self.edit(self._message, text)
                self._shown = text
            except self.error as exc:
                self._log.warning("%s: streaming preview stopped: %s", self.platform, exc)
                self._broken = True
            self._last_flush = time.monotonic()
