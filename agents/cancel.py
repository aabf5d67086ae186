"""Cooperative cancellation for agent runs.

A `CancelToken` is set by `/stop`, `/stopall`, shutdown or a timeout. The loop checks it
before each model call and each tool, and races long waits against it, so a cancelled run
still answers every `tool_use` and leaves a valid history. `child()` makes a token that is
cancelled with its parent: that is how `/stop` cascades to sub-agents.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


class Cancelled(Exception):
    """Raised by `CancelToken.race` when the token fires first."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelToken:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._children: list[CancelToken] = []
        self.reason = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled by user") -> None:
        if self._event.is_set():
            return
        self.reason = reason
        self._event.set()
        for child in self._children:
            child.cancel(reason)

    def child(self) -> CancelToken:
        token = CancelToken()
        if self.cancelled:
            token.cancel(self.reason)
        else:
            self._children.append(token)
        return token

    def check(self) -> None:
        if self.cancelled:
            raise Cancelled(self.reason)

    async def wait(self) -> None:
        await self._event.wait()

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`, or cancel it and raise `Cancelled` if the token fires first."""
        self.check()
        task: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        waiter: asyncio.Future[bool] = asyncio.ensure_future(self._event.wait())
        try:
            both: set[asyncio.Future[Any]] = {task, waiter}
            await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise Cancelled(self.reason)
