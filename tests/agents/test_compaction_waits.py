"""Compaction out of a talking user's way (issue 40): a session that falls due is compacted
once its chat has been quiet for `SessionUpkeep.quiet` seconds, not beside the turns of a
user who keeps writing; and it is compacted all the same once they stop."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from bot.hub.upkeep import AT_ONCE
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from tests.fakes.anthropic import Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import running_daemon
from tests.model_backends import OpenAIView
from tests.waiting import eventually

QUIET_S = 3.0  # far longer than a turn here, even on a loaded machine


def scripted(body: dict[str, Any]) -> Reply:
    asked = last_user_text(body)
    if asked.startswith("[Automatic compaction]"):
        return Reply.text("- The user counted to seven.")
    if "Automatic memory flush" in asked:
        return Reply.text("NO_REPLY")
    return Reply.text("echo: " + asked)


def is_upkeep(body: dict[str, Any]) -> bool:
    asked = last_user_text(body)
    return asked.startswith("[Automatic compaction]") or "Automatic memory flush" in asked


async def test_a_due_compaction_waits_until_the_user_stops_writing(tmp_path: Path) -> None:
    chan = MemoryChannel("console", account="local")
    overrides = {"agent.compaction": {"max_messages": 8, "keep_last": 4}}
    async with FakeOpenAI() as server:
        fake = OpenAIView(server)
        fake.default = scripted
        async with running_daemon(tmp_path, fake, {"console": chan}, overrides) as daemon:
            assert daemon.upkeep is not None and daemon.gateway is not None
            daemon.upkeep.quiet = QUIET_S
            words = ["one", "two", "three", "four", "five", "six", "seven"]
            for i, word in enumerate(words, 1):  # due from the fifth turn on
                await chan.say(word, chat_id="owner")
                await chan.wait_sent(i, timeout=60)  # the first turn loads the SDK
                await asyncio.wait_for(daemon.gateway.wait_idle(), 30)
            talking = len(fake.requests)
            await asyncio.wait_for(daemon.upkeep.wait_idle(), QUIET_S + 20)
            store: Store = daemon.store  # type: ignore[assignment]
            key = str(SessionKey.dm("main", "console", "local", "owner"))
            session = await store.session(key)
        requests = fake.requests
    assert not any(is_upkeep(body) for body in requests[:talking])  # none beside the turns
    assert any(is_upkeep(body) for body in requests[talking:])  # and then it ran
    assert session.compactions == 1
    assert "seven" in session.summary or "counted" in session.summary
    assert chan.texts()[-1] == "echo: seven"


async def test_a_wave_of_due_sessions_compacts_a_few_at_a_time(tmp_path: Path) -> None:
    """Five chats fall due together: AT_ONCE compactions run, the others wait their turn
    (each would otherwise open its own model connections beside the turns), and then every
    one of them is compacted; a chat whose context is nearly full skips that queue."""
    chan = MemoryChannel("console", account="local")
    overrides = {"agent.compaction": {"max_messages": 8, "keep_last": 4}}
    gate = asyncio.Event()
    upkeep_requests = 0

    def held(body: dict[str, Any]) -> Reply:
        nonlocal upkeep_requests
        if not is_upkeep(body):
            if "nearly full" in last_user_text(body):  # the model says the prompt was huge
                return Reply.text("noted", usage={"input_tokens": 195_000})
            return scripted(body)
        upkeep_requests += 1
        return dataclasses.replace(scripted(body), hold=gate)

    chats = ["a", "b", "c", "d", "e"]
    async with FakeOpenAI() as server:
        fake = OpenAIView(server)
        fake.default = held
        async with running_daemon(tmp_path, fake, {"console": chan}, overrides) as daemon:
            assert daemon.upkeep is not None and daemon.gateway is not None
            daemon.upkeep.quiet = 0  # due means now
            sent = 0
            for chat in chats:
                for word in ["one", "two", "three", "four", "five"]:  # due after the fifth
                    await chan.say(word, chat_id=chat)
                    sent += 1
                    await chan.wait_sent(sent, timeout=60)
                    await asyncio.wait_for(daemon.gateway.wait_idle(), 30)
            upkeep = daemon.upkeep
            await eventually(lambda: upkeep.queued == len(chats) - AT_ONCE, timeout=30)
            assert upkeep_requests == AT_ONCE  # one request each, held; the rest queued
            for n in range(5):  # past 90% of the 200k window: it compacts without queueing
                await chan.say(f"nearly full {n}", chat_id="full")
                sent += 1
                await chan.wait_sent(sent, timeout=60)
                await asyncio.wait_for(daemon.gateway.wait_idle(), 30)
            await eventually(lambda: upkeep_requests == AT_ONCE + 1, timeout=30)
            assert upkeep.queued == len(chats) - AT_ONCE
            gate.set()
            await asyncio.wait_for(upkeep.wait_idle(), 60)
            store: Store = daemon.store  # type: ignore[assignment]
            compactions = [
                (await store.session(str(SessionKey.dm("main", "console", "local", c)))).compactions
                for c in [*chats, "full"]
            ]
    assert compactions == [1] * (len(chats) + 1)
    assert upkeep.queued == 0
