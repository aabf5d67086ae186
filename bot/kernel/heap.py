"""Freed heap memory given back to the system, now and then, so RSS stays flat for months.

glibc's malloc keeps the memory a process frees in its arenas for later use, and returns only
the free space at the very top of the main heap by itself. A daemon that serves for weeks
frees memory everywhere in its heaps (every turn's request bodies, rows and parsed replies,
on the event loop, the store's thread and the worker threads), so its RSS crept up although
what it holds did not: in the soak of issue 40 Python's own allocations stayed at 56 MiB while
the arenas' free space, and RSS with it, grew about 1 MiB every 5,000 turns.
`malloc_trim(0)` gives every free page of every arena back (`madvise`); `HeapTrim.tick()`,
called on the daemon's beat, runs it in a worker thread at most every `every` seconds. Off
glibc (musl, macOS) there is no such call and it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_EVERY_S = 60.0  # a trim of a daemon's heap takes a few milliseconds, off the loop


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


class HeapTrim:
    """`await tick()` on every beat: a trim when `every` seconds have passed since the last."""

    def __init__(self, every: float = TRIM_EVERY_S) -> None:
        self.every = every
        self._trim = _malloc_trim()
        self._last = time.monotonic()
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    async def tick(self) -> None:
        if self._trim is None or time.monotonic() - self._last < self.every:
            return
        self._last = time.monotonic()
        await asyncio.to_thread(self.trim_now)

    def trim_now(self) -> bool:
        """Give the free pages back now; whether any were (False off glibc too)."""
        if self._trim is None:
            return False
        began = time.perf_counter()
        released = bool(self._trim(0))
        self.trims += 1
        log.debug("heap trimmed in %.1f ms", (time.perf_counter() - began) * 1000)
        return released
