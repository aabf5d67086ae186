"""What a group said since the bot was last mentioned, handed to the next mention's turn.

Unmentioned group messages are not turns; the gateway keeps the last
`gateway.group_context_messages` of them per chat (any thread) so the next mention can see
what the people were talking about. Taking the buffer empties it.
"""

from __future__ import annotations

import collections


class GroupContext:
    """Per-chat bounded buffers of `"who: text"` lines."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffers: dict[str, collections.deque[str]] = {}

    def remember(self, chat_key: str, who: str, text: str) -> None:
        if self.limit <= 0:
            return
        buffer = self._buffers.get(chat_key)
        if buffer is None:
            buffer = self._buffers[chat_key] = collections.deque(maxlen=self.limit)
        buffer.append(f"{who}: {text}")

    def take(self, chat_key: str) -> str:
        buffer = self._buffers.pop(chat_key, None)
        return "\n".join(buffer) if buffer else ""

    def __len__(self) -> int:
        return len(self._buffers)
