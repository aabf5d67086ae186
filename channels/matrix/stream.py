"""The Matrix streaming preview: `MatrixReplyStream` shows a reply while the model writes it,
as one message posted and then replaced by edits (`m.replace`, `channels/edited_preview.py`),
finalised into the first chunk.

Each edit is an event the homeserver counts against the sender's message rate (Synapse's
`rc_message`: 0.2/s with bursts of 10 by default), so the preview is edited at most once per
`stream_interval`: 3 s by default, which keeps a reply streaming for a minute (20 edits)
within that budget (10 + 0.2 x 60 = 22). Past it, the homeserver answers 429 with a
`retry_after_ms`, which nio waits out before trying again: the preview pauses, the reply is
not lost.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from channels.background import Spawn
from channels.base import ChatRef
from channels.edited_preview import EditedPreview
from channels.matrix.delivery import MatrixDelivery, MatrixDeliveryError, render_chunks
from channels.matrix.render import render_matrix

log = logging.getLogger("channels.matrix")


class MatrixReplyStream(EditedPreview[str]):
    """The preview of one reply in one Matrix chat (event ids name the messages)."""

    platform = "matrix"
    error = MatrixDeliveryError

    def __init__(self, delivery: MatrixDelivery, chat: ChatRef, spawn: Spawn) -> None:
        super().__init__(interval=delivery.options.stream_interval, spawn=spawn, log=log)
        self._delivery = delivery
        self._chat = chat
        self._limit = delivery.options.chunk_limit

    def cut(self, text: str) -> list[str]:
        return [chunk.body for chunk in render_chunks(text, self._limit)]

    def chat_lock(self) -> AbstractAsyncContextManager[Any]:
        return self._delivery.chat_lock(self._chat)

    async def post_preview(self, text: str) -> str:
        return await self._delivery.post(self._chat, render_matrix(text))

    async def edit(self, message: str, text: str) -> None:
        await self._delivery.edit(self._chat, message, render_matrix(text))

    async def delete(self, message: str) -> None:
        await self._delivery.delete(self._chat, message)

    async def post_chunks(self, chunks: list[str], *, first: bool) -> None:
        await self._delivery.post_chunks(self._chat, [render_matrix(c) for c in chunks])
