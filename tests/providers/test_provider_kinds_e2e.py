"""What a chat sees is the same whichever kind of provider answers: silent replies stay
silent, leaked reasoning is cleaned, reasoning fields never arrive, and a chat that chose
another model with /model is also compacted by that model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI, last_user_text
from tests.harness import running_daemon
from tests.model_backends import KINDS, OpenAIView

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
WAIT = 30


@pytest.fixture(params=KINDS)
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "openai":
        async with FakeOpenAI() as server:
            server.reasoning = "PRIVATE REASONING"  # as DeepSeek / vLLM send it
            yield OpenAIView(server)
    else:
        async with FakeAnthropic() as server:
            yield server


async def test_silent_reply_is_saved_but_not_sent(tmp_path: Path, fake: Any) -> None:
    fake.queue(Reply.text("NO_REPLY"), Reply.text("later"))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("ok thanks")
        await asyncio.wait_for(daemon.gateway.wait_idle(), WAIT)  # type: ignore[union-attr]
        await chan.say("and now?")
        assert await chan.wait_sent(1, timeout=WAIT) == ["later"]
        store: Store = daemon.store  # type: ignore[assignment]
        session = await store.session(str(SessionKey.dm("main", "telegram", "bot", "u1")))
        saved = await store.messages(session.id)
    assert saved[1]["content"][0] == {"type": "text", "text": "NO_REPLY"}


async def test_leaked_reasoning_is_cleaned_and_reasoning_fields_never_arrive(
    tmp_path: Path, fake: Any
) -> None:
    fake.queue(Reply.text("<think>\nThe user wants X.\n</think>\n\nHere is X.", chunk=7))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS):
        await chan.say("give me X")
        [reply] = await chan.wait_sent(1, timeout=WAIT)
    assert reply.strip() == "Here is X."
    assert "PRIVATE" not in reply and "think" not in reply


async def test_a_chat_on_another_model_is_compacted_by_that_model(tmp_path: Path) -> None:
    async with FakeAnthropic() as claude, FakeOpenAI() as local:

        def answer(body: dict[str, Any]) -> Reply:
            if last_user_text(body).startswith("[Automatic compaction]"):
                return Reply.text("- The user's cat is called Miso.")
            if "Automatic memory flush" in last_user_text(body):
                return Reply.text("NO_REPLY")
            return Reply.text("echo: " + last_user_text(body))

        local.default = answer
        chan = MemoryChannel("console", account="local")
        overrides = {
            "agent.compaction": {"max_messages": 8, "keep_last": 4},
            "providers": {
                "anthropic": {"api_key": "test-key", "base_url": claude.base_url},
                "local": {"kind": "openai", "base_url": local.base_url, "models": ["qwen3:8b"]},
            },
        }
        async with running_daemon(tmp_path, claude, {"console": chan}, overrides) as daemon:
            await chan.say("/model local/qwen3:8b", chat_id="owner")
            await chan.wait_sent(1, timeout=WAIT)
            for i, line in enumerate(["my cat is Miso", "a", "b", "c", "d"], 2):
                await chan.say(line, chat_id="owner")
                await chan.wait_sent(i, timeout=WAIT)
                await asyncio.wait_for(daemon.gateway.wait_idle(), WAIT)  # type: ignore[union-attr]
            assert daemon.upkeep is not None
            await asyncio.wait_for(daemon.upkeep.wait_idle(), WAIT)
            store: Store = daemon.store  # type: ignore[assignment]
            session = await store.session(str(SessionKey.dm("main", "console", "local", "owner")))
        assert session.compactions >= 1 and "Miso" in session.summary
        assert claude.requests == []  # nothing of this chat went to the default provider
        assert all(r["model"] == "qwen3:8b" for r in local.requests)
