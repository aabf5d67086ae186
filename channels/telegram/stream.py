"""The Telegram streaming preview: a reply shown while it is written, then finalised in place.

Owns `TelegramReplyStream`: one preview message edited at most every `stream_interval` s
(skipped while the chat is under a flood wait; failures never end the turn), and the final
edit plus any further chunks, which wait for the flood wait to pass, or the preview's
deletion when the reply turns out silent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from telegram.error import BadRequest, TelegramError

from channels.background import Spawn
from channels.base import ChatRef
from channels.chunking import split_markdown
from channels.formatting import utf16_len
from channels.telegram.delivery import TelegramSender
from channels.telegram.errors import TelegramDeliveryError
from channels.telegram.redaction import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)


class TelegramReplyStream:
    """One preview message, edited at most every `interval` s, finalised in place.

    Its collaborators come in explicitly: the adapter's `sender` does every Bot API call and
    `spawn` starts the preview worker as a task the adapter cancels on stop().
    """

    def __init__(
        self, sender: TelegramSender, chat: ChatRef, *, interval: float, limit: int, spawn: Spawn
    ) -> None:
        self._sender = sender
        self._spawn = spawn
        self._chat = chat
        self.interval = interval
        self._limit = limit
        self._latest = ""
        self._shown = ""
        self._message_id: int | None = None
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    async def update(self, text: str) -> None:
        if self._closed.is_set() or not text.strip():
            return
        self._latest = text
        self._wake.set()
        if self._worker is None:
            self._worker = self._spawn(self._run(), "telegram-preview")

    async def finish(self, text: str) -> None:
        await self._close()
        message_id = self._message_id
        if not text.strip():
            if message_id is not None:
                with contextlib.suppress(TelegramError):
                    await self._sender.delete(self._chat, message_id)
            return
        chunks = split_markdown(text, self._limit, measure=utf16_len)
        if message_id is None:
            await self._sender.send_chunks(self._chat, chunks, True)
            return
        try:
            # A preview that already shows the first chunk needs no edit (Telegram would
            # refuse it as "not modified"): one Bot API call less for most short replies.
            if split_markdown(self._shown, self._limit, measure=utf16_len)[:1] != chunks[:1]:
                await self._sender.edit(self._chat, message_id, chunks[0], retry=True)
        except BadRequest as exc:
            if "not found" not in str(exc).lower():
                raise self._sender.delivery_error(
                    "edit a message in", self._chat.chat_id, exc
                ) from None
            await self._sender.send_chunks(self._chat, chunks[:1], False)
        except TelegramError as exc:
            raise self._sender.delivery_error(
                "edit a message in", self._chat.chat_id, exc
            ) from None
        if len(chunks) > 1:
            await self._sender.send_chunks(self._chat, chunks[1:], False)

    async def abort(self) -> None:
        await self._close()

    async def _close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._worker is not None:
            await asyncio.wait([self._worker])  # never raises, even if stop() cancelled it

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            if self._closed.is_set():
                return
            self._wake.clear()
            text = self._latest
            if text != self._shown:
                await self._show(text)
            not_before = self._sender.flood.not_before(self._chat.chat_id)
            delay = max(self.interval, not_before - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), delay)
            if self._closed.is_set():
                return

    async def _show(self, text: str) -> None:
        preview = split_markdown(text, self._limit, measure=utf16_len)[:1]
        if not preview or self._sender.flood.limited(self._chat.chat_id):
            return  # a preview is never worth waiting for: the final text will be
        try:
            if self._message_id is None:
                self._message_id = await self._sender.post(
                    self._chat, preview[0], quote=True, retry=False
                )
            else:
                await self._sender.edit(self._chat, self._message_id, preview[0], retry=False)
            self._shown = text
        except TelegramDeliveryError as exc:  # a 429 is held by `flood` for the next calls
            log.debug("telegram: preview failed in chat %s: %s", self._chat.chat_id, exc)
        except TelegramError as exc:
            log.debug(
                "telegram: preview edit failed in chat %s: %s",
                self._chat.chat_id,
                self._sender.describe(exc),
            )
