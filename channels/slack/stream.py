"""The Slack streaming preview: `SlackReplyStream` shows a reply while the model writes it,
as one message posted and then edited in place (`channels/edited_preview.py`), finalised into
the first chunk of the answer.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from channels.background import Spawn
from channels.base import ChatRef
from channels.chunking import split_markdown
from channels.edited_preview import EditedPreview
from channels.slack.delivery import SlackDelivery, SlackDeliveryError

# One logger for the whole Slack adapter: log settings and records keep naming channels.slack.
log = logging.getLogger("channels.slack")


class SlackReplyStream(EditedPreview[str]):
    """The preview of one reply in one Slack chat; messages are known by their `ts`."""

    platform = "slack"
    error = SlackDeliveryError

    def __init__(self, delivery: SlackDelivery, chat: ChatRef, spawn: Spawn) -> None:
        super().__init__(interval=delivery.options.stream_interval, spawn=spawn, log=log)
        self._delivery = delivery
        self._chat = chat
        self._limit = delivery.options.chunk_limit

    def cut(self, text: str) -> list[str]:
        return split_markdown(text, self._limit)

    def chat_lock(self) -> AbstractAsyncContextManager[Any]:
        return self._delivery.chat_lock(self._chat)

    async def post_preview(self, text: str) -> str:
        return await self._delivery.post(self._chat, text)

    async def edit(self, message: str, text: str) -> None:
        await self._delivery.edit(self._chat, message, text)

    async def delete(self, message: str) -> None:
        await self._delivery.delete(self._chat, message)

    async def post_chunks(self, chunks: list[str], *, first: bool) -> None:
        for chunk in chunks:
            await self._delivery.post(self._chat, chunk)
