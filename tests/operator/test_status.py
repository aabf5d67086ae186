"""`perch status` reads what the running daemon reports: channels, runs, wake-ups, cost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.operator.cli import main
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon


async def test_status_shows_channels_runs_wakeups_and_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {
        "channels.telegram.dm_policy": "open",
        "channels.telegram.allow_from": ["*"],
        "heartbeat.every": "30m",
    }
    config = tmp_path / "config.yaml"
    async with FakeAnthropic() as fake:
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await chan.say("hello")
            await chan.wait_sent(1)
            assert daemon.gateway is not None
            await asyncio.wait_for(daemon.gateway.wait_idle(), 5)
            daemon.write_status()
            assert await asyncio.to_thread(main, ["status", "--config", str(config)]) == 0
            out = capsys.readouterr().out
        assert await asyncio.to_thread(main, ["status", "--config", str(config)]) == 0
        after = capsys.readouterr().out
    assert "Perch is running" in out and "model claude-sonnet-5-5" in out
    assert "channel telegram: up" in out
    assert "active runs: 0, queued: 0" in out
    assert "next heartbeat:" in out
    assert "today (UTC):" in out and "$0.0" in out
    assert after.startswith("Perch is not running.")


async def test_sessions_lists_conversations_most_recent_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides),
    ):
        await chan.say("hi", chat_id="older")
        await chan.wait_sent(1)
        await chan.say("hi", chat_id="newer")
        await chan.wait_sent(2)
    assert await asyncio.to_thread(main, ["sessions", "--config", str(config)]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["UPDATED", "COST", "SESSION"]
    assert [line.rsplit(":", 1)[-1] for line in lines] == ["newer", "older"]
    assert all("$" in line for line in lines)
