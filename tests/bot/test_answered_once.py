"""Answered once: a message's inbox row is closed the moment its reply is out, before the
work that follows the reply (the typing indicator's stop, indexing, the turn's listeners),
so an instance that dies in that time leaves nothing another instance would run, and answer,
again. Here the platform is slow to stop the typing indicator, which holds the turn just
after its reply; the row must be closed already."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.store.roles import Store
from channels.base import ChatRef
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
WAIT = 30


@dataclass
class SlowTypingChannel(MemoryChannel):
    """A platform whose typing indicator takes until `release` to stop."""

    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    @contextlib.asynccontextmanager
    async def typing(self, chat: ChatRef) -> AsyncIterator[None]:
        async with super().typing(chat):
            yield
        self.stopping.set()
        await self.release.wait()


async def test_the_inbox_row_is_closed_as_soon_as_the_reply_is_out(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        chan = SlowTypingChannel("telegram")
        async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
            store: Store = daemon.store  # type: ignore[assignment]
            await chan.say("hello")
            await asyncio.wait_for(chan.stopping.wait(), WAIT)  # replied; the turn is held
            assert chan.texts() == ["echo: hello"]
            assert await store.inbox_pending() == []  # nothing left to take over and re-run
            chan.release.set()
