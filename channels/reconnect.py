"""Reconnecting with backoff, shared by the adapters' connection supervisors.

`Backoff` is the delay between attempts: it starts at `initial`, doubles after each failure
up to `maximum`, and `reset()` brings it back after a success. `connect_until_up(connect,
backoff, on_failure=...)` calls `connect()` until it returns: after a failure it reports it
(`on_failure(error, delay)` sets the channel's status, e.g. "cannot reach ...; retrying in
2 s", and returns False when retrying is pointless, such as a rejected token), waits, and
tries again. `attempted` is set after every attempt, so `start()` can return once the first
one is over without waiting for the platform to come back. Cancelling the caller (the
adapter's `stop()`) ends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class Backoff:
    """Delay between connection attempts (see the module docstring)."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial = initial
        self.maximum = max(initial, maximum)
        self.current = initial

    def failed(self) -> float:
        """The delay to wait now; the next one is twice as long (up to `maximum`)."""
        delay = self.current
        self.current = min(self.current * 2, self.maximum)
        return delay

    def reset(self) -> None:
        self.current = self.initial


async def connect_until_up(
    connect: Callable[[], Awaitable[T]],
    backoff: Backoff,
    *,
    on_failure: Callable[[Exception, float], bool],
    attempted: asyncio.Event | None = None,
) -> T | None:
    """`connect()`'s result once it succeeds; None if `on_failure` gave up."""
    while True:
        try:
            result = await connect()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            delay = backoff.current
            keep_trying = on_failure(exc, delay)
            if attempted is not None:
                attempted.set()
            if not keep_trying:
                return None
            await asyncio.sleep(backoff.failed())
            continue
        backoff.reset()
        if attempted is not None:
            attempted.set()
        return result
