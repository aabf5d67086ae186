"""Per-chat ordering shared by the adapters: one sender per chat at a time, no global lock.

`ChatLocks` hands out one `asyncio.Lock` per key (a chat, or a chat and thread) for as long
as someone holds or waits for it, and forgets it afterwards, so a long-running daemon keeps
no lock per chat it ever talked to. Waiters are served in arrival order (asyncio's locks are
fair), which is what keeps the chunks of two replies to one chat from interleaving.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable


class ChatLocks:
    """Reference-counted per-key locks (see the module docstring)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        """Enter the chat's turn; later callers for the same key wait in order."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """How many keys are held or waited for right now."""
        return len(self._locks)
