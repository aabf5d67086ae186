"""Typing that pays: "typing…" shows once a reply has taken `gateway.typing_after` (0.5 s);
a reply done sooner costs the platform no indicator call, and one that takes longer shows
the indicator until it is sent, as before."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.waiting import eventually

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


async def test_a_quick_reply_shows_no_typing(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        chan = MemoryChannel("telegram")
        # (5 s, not the shipped 0.5 s, and a first turn to load the SDK: a busy machine is slow)
        settings = {**OPEN_DMS, "gateway.typing_after": "5s"}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
            await chan.say("first")
            await chan.wait_sent(1, timeout=30)
            fake.queue(Reply.text("Hello there, Ada."))
            await chan.say("hi")
            await chan.wait_sent(2, timeout=30)
            assert chan.texts()[1] == "Hello there, Ada."
            assert chan.typing_started == 0


async def test_a_slow_reply_shows_typing_until_it_is_sent(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        chan = MemoryChannel("telegram")
        settings = {**OPEN_DMS, "gateway.typing_after": "0.05s"}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
            answer = asyncio.Event()
            fake.queue(Reply.text("Thought it over.", hold=answer))
            await chan.say("a hard one")
            await eventually(lambda: chan.typing_active == 1)  # shown while the model works
            answer.set()
            await chan.wait_sent(1, timeout=30)
            await eventually(lambda: chan.typing_active == 0)  # and gone with the reply
            assert chan.typing_started == 1
            assert chan.texts() == ["Thought it over."]
