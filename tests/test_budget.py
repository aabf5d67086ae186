"""Cost guards: the daily budget (warn at 80%, pause at 100%, /budget lift) and allow_fast."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.tools.base import ToolContext, ToolError
from agents.tools.cron import CronRequest, CronTool
from bot.budget import Budget, BudgetConfig
from bot.cli import main
from bot.config import Config
from bot.scheduler import Scheduler
from bot.store import open_store
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OWNER = {"channels.telegram.allow_from": ["owner1"], "agent.budget.daily_usd": 0.01}
# Sonnet: $3 / $15 per million tokens in / out.
EIGHTY_FOUR_PERCENT = {"input_tokens": 10, "output_tokens": 560}  # $0.00843
THIRTY_PERCENT = {"input_tokens": 10, "output_tokens": 200}  # $0.00303


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_budget_warns_once_then_pauses_everything_until_lifted(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        fake.queue(Reply.text("one", usage=EIGHTY_FOUR_PERCENT))
        await chan.say("first", chat_id="owner1")
        texts = await chan.wait_sent(2, timeout=30)
        assert texts[0] == "one" and "Heads-up: $0.01 of today's $0.01 budget" in texts[1]
        assert "(84%)" in texts[1]

        fake.queue(Reply.text("two", usage=THIRTY_PERCENT))
        await chan.say("second", chat_id="owner1")
        texts = await chan.wait_sent(4, timeout=30)
        assert texts[2] == "two" and "budget of $0.01 is used up" in texts[3]
        assert len([t for t in texts if t.startswith("Heads-up")]) == 1  # told once

        calls = len(fake.requests)
        await chan.say("third", chat_id="owner1")
        texts = await chan.wait_sent(5, timeout=30)
        assert texts[4].startswith("Today's budget of $0.01 is used up")
        assert "\n" not in texts[4] and "/budget lift" in texts[4]

        scheduler = daemon.scheduler
        assert isinstance(scheduler, Scheduler)
        view = await scheduler.add_job(CronRequest("every", "1h", "Report.", deliver_to="owner"))
        await scheduler.run_now(view.id)
        job = await scheduler.jobs.get(view.id)
        assert job is not None and job.last_status == "skipped"
        assert "daily budget" in (job.last_error or (await scheduler.jobs.runs(view.id))[0].detail)

        assert daemon.subagents is not None
        ctx = ToolContext(workspace=tmp_path, session_key="agent:main:telegram:bot:dm:owner1")
        with pytest.raises(ToolError, match=r"cannot spawn .* now: Today.s budget"):
            await daemon.subagents.spawn("look into it", ctx)
        assert len(fake.requests) == calls  # nothing above reached the model

        config = str(daemon.config.source)
        assert await asyncio.to_thread(main, ["status", "--config", config]) == 0
        assert "budget: $0.01 of $0.01 today (115%), PAUSED" in capsys.readouterr().out

        await chan.say("/budget", chat_id="owner1")
        assert "PAUSED" in (await chan.wait_sent(6, timeout=30))[5]
        await chan.say("/budget lift", chat_id="owner1")
        assert "Budget lifted" in (await chan.wait_sent(7, timeout=30))[6]
        await chan.say("fourth", chat_id="owner1")
        assert (await chan.wait_sent(8, timeout=30))[7] == "echo: fourth"


async def test_only_the_owner_may_lift_and_off_means_off(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "perch.db")
    try:
        budget = Budget(BudgetConfig(daily_usd=1.0), store)
        assert await budget.command("lift", is_owner=False) == "Only the owner can lift the budget."
        assert await budget.notice() == ""  # nothing spent
        off = Budget(BudgetConfig(), store)
        assert not off.enabled and await off.notice() == ""
        assert "daily_usd is 0" in await off.command("lift", is_owner=True)
    finally:
        await store.close()


async def test_cron_tool_refuses_sub_minute_intervals_unless_allow_fast(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "perch.db")
    try:
        tool = CronTool(Scheduler(Config(), store))
        ctx = ToolContext(workspace=tmp_path, session_key="agent:main:heartbeat")
        args = {"action": "add", "every": "30s", "message": "x", "deliver_to": "none"}
        with pytest.raises(ToolError, match=r"shortest interval is 60 s .*allow_fast"):
            await tool.run(args, ctx)
        result = await tool.run({**args, "allow_fast": True}, ctx)
        assert "every 30s" in result.content
    finally:
        await store.close()


async def test_cli_cron_every_needs_allow_fast_below_a_minute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("channels: {console: {enabled: false}}\n")
    base = ["cron", "add", "-m", "x", "--to", "none", "--config", str(config)]
    assert await asyncio.to_thread(main, [*base, "--every", "1s"]) == 2
    assert "--allow-fast" in capsys.readouterr().err
    assert await asyncio.to_thread(main, [*base, "--every", "30"]) == 2
    assert "needs a unit" in capsys.readouterr().err
    assert await asyncio.to_thread(main, [*base, "--every", "1s", "--allow-fast"]) == 0
    assert "Perch is not running; the job is scheduled when it starts." in capsys.readouterr().out
