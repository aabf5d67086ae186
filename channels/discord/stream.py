"""The Discord streaming preview: `DiscordReplyStream` shows a reply while the model writes
it, as one message posted and then edited in place (`channels/edited_preview.py`), finalised
into the first chunk.

Discord allows about five edits of a channel's messages per five seconds; the preview is
edited at most once per `stream_interval` (1.2 s by default), so a reply streaming in two
chats of one channel still stays inside that.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from channels.background import Spawn
from channels.base import ChatRef
from channels.discord.delivery import DiscordDelivery, DiscordDeliveryError, render_chunks
from channels.edited_preview import EditedPreview

log = logging.getLogger("channels.discord")


class DiscordReplyStream(EditedPreview[int]):
    """The preview of one reply in one Discord chat; the first message replies to the user's."""

    platform = "discord"
    error = DiscordDeliveryError

    def __init__(self, delivery: DiscordDelivery, chat: ChatRef, spawn: Spawn) -> None:
        super().__init__(interval=delivery.options.stream_interval, spawn=spawn, log=log)
        self._delivery = delivery
        self._chat = chat
        self._limit = delivery.options.chunk_limit

    def cut(self, text: str) -> list[str]:
        return render_chunks(text, self._limit)

    def chat_lock(self) -> AbstractAsyncContextManager[Any]:
        return self._delivery.chat_lock(self._chat)

    async def post_preview(self, text: str) -> int:
        return await self._delivery.post(self._chat, text, reply=True)

    async def edit(self, message: int, text: str) -> None:
        await self._delivery.edit(self._chat, message, text)

    async def delete(self, message: int) -> None:
        await self._delivery.delete(self._chat, message)

    async def post_chunks(self, chunks: list[str], *, first: bool) -> None:
        if first:
            await self._delivery.post_chunks(self._chat, chunks)
            return
        for chunk in chunks:
            await self._delivery.post(self._chat, chunk, reply=False)
