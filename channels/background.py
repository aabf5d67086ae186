"""The background tasks a channel starts beside its connection: `BackgroundTasks`.

Inbound handlers, streaming previews, command registration: each is kept until it ends, a
failure is logged on the channel's own logger (never lost as "Task exception was never
retrieved"), and the channel's `stop()` cancels whatever still runs. `Spawn` is the one call
the channel's parts are given to start one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class BackgroundTasks:
    """The running tasks of one channel; `spawn` starts one, `cancel_all` ends them."""

    def __init__(self, log: logging.Logger, platform: str) -> None:
        self._log = log
        self._platform = platform
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    async def cancel_all(self, timeout: float | None = 1.0) -> None:
        """Cancel every task still running and wait for them (at most `timeout` s; None:
        until they end)."""
        running = [task for task in self._tasks if not task.done()]
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running, timeout=timeout)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self._log.error("%s: %s failed: %s", self._platform, task.get_name(), exc, exc_info=exc)
