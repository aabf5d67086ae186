"""What the per-turn cost work (issue 19) must leave intact: the model SDK preloaded after
start (or not, when configured so) with replies unchanged; per-chat caches that forget idle
chats and read them back from the store; a long session's turn sending the same history."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.model import Usage
from bot.daemon import Daemon
from bot.hub import model_choice
from bot.hub.model_choice import ModelChoices
from bot.store.sqlite.store import SQLiteStore
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

OWNER = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["u1", "*"]}
PRELOADED = "model providers loaded"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def settle(daemon: Daemon) -> None:
    assert daemon.gateway is not None
    await asyncio.wait_for(daemon.gateway.wait_idle(), 30)


def _preloaded(caplog: pytest.LogCaptureFixture) -> bool:
    return any(PRELOADED in r.getMessage() for r in caplog.records)


async def test_the_model_sdk_is_loaded_in_the_background_after_start(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agents.providers.router")
    fake.queue(Reply.text("Hello, Ada."))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await eventually(lambda: _preloaded(caplog), 30)
        assert not fake.requests  # preloading sends the model nothing
        await chan.say("hi")
        await settle(daemon)
    assert chan.texts() == ["Hello, Ada."]
    assert chan.typing_started == 1  # the running turn still shows typing


async def test_preloading_can_be_turned_off(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agents.providers.router")
    fake.queue(Reply.text("Hello."))
    chan = MemoryChannel("telegram")
    overrides = {**OWNER, "agent.preload_model": False}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("hi")
        await settle(daemon)
        assert chan.texts() == ["Hello."]  # loaded on first use instead
        assert not _preloaded(caplog)


async def test_model_choices_forget_idle_chats_and_read_them_back(
    tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_choice, "CACHED_SESSIONS", 3)
    config = make_config(tmp_path, fake.base_url)
    store = await SQLiteStore.open(tmp_path / "perch.db")
    try:
        choices = ModelChoices(store, config)
        answer = await choices.command("telegram:dm:ada", "anthropic/claude-haiku-4-5")
        assert "now uses" in answer
        chosen = await choices.chosen("telegram:dm:ada")
        assert chosen
        for i in range(10):
            assert await choices.chosen(f"telegram:dm:{i}") == ""
        assert len(choices._cache) == 3  # bounded, whatever the number of chats
        assert "telegram:dm:ada" not in choices._cache
        assert await choices.chosen("telegram:dm:ada") == chosen  # read back from the store
    finally:
        await store.close()


async def test_a_long_session_sends_only_its_last_turns(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {**OWNER, "agent.history_turns": 3, "agent.compaction.max_messages": 100_000}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        fake.queue(Reply.text("first"))
        await chan.say("hi")
        await settle(daemon)
        assert daemon.store is not None
        [row] = await daemon.store.list_sessions()
        for i in range(600):  # 1,200 more stored messages
            await daemon.store.save_run(
                row.id,
                row.key,
                [
                    {"role": "user", "content": [{"type": "text", "text": f"old {i}"}]},
                    {"role": "assistant", "content": [{"type": "text", "text": f"ok {i}"}]},
                ],
                usage=Usage(),
            )
        fake.queue(Reply.text("second"))
        await chan.say("and now?")
        await settle(daemon)
    assert chan.texts() == ["first", "second"]
    sent = fake.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant"] * 3 + ["user"]
    assert "old 597" in str(sent[0]["content"]) and last_user_text(fake.requests[-1]) == (
        "and now?"
    )
