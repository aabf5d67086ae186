"""Keeps a platform's typing indicator alive while a turn runs.

`keep_typing(start, stop, every)` is an async context manager: it calls `start()` at once,
again every `every` seconds (platforms expire the indicator after ~5-10 s), and `stop()` (if
the platform has one) on exit, whether the turn finished, failed or was cancelled. Errors from
the platform are logged and never end the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def keep_typing(
    start: Callable[[], Awaitable[object]],
    stop: Callable[[], Awaitable[object]] | None = None,
    every: float = 4.0,
) -> AsyncIterator[None]:
    async def refresh() -> None:
        while True:
            try:
                await start()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # typing is cosmetic: never fail the turn over it
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(every)

    task = asyncio.create_task(refresh())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if stop is not None:
            try:
                await stop()
            except Exception as exc:
                log.debug("stopping typing indicator failed: %s", exc)
