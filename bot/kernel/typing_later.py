"""The typing indicator of a turn, shown once the reply has taken `gateway.typing_after`.

A reply done sooner needs no indicator: it would only cost the platform a call (one more
against its pace, in a burst of quick replies) and the daemon its CPU (`bench/README.md`,
issue 40). `typing_later(channel, chat, after)` is an async context
manager: after `after` seconds (0: at once) it enters `channel.typing(chat)` in a task of its
own, and on exit it stops waiting or leaves that indicator, so the indicator stops with the
turn whether it finished, failed or was cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from channels.base import Channel, ChatRef

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def typing_later(channel: Channel, chat: ChatRef, after: float) -> AsyncIterator[None]:
    if after <= 0:
        async with channel.typing(chat):
            yield
        return
    shown = contextlib.AsyncExitStack()

    async def show() -> None:
        await asyncio.sleep(after)
        await shown.enter_async_context(channel.typing(chat))

    task = asyncio.create_task(show(), name="typing-later")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception as exc:  # typing is cosmetic: never fail the turn over it
                log.debug("typing indicator failed: %s", exc)
        await shown.aclose()
