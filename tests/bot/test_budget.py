"""Cost guards: the daily budget (warn at 80%, pause at 100%, /budget lift) and allow_fast."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.model import Usage
from agents.tools.base import ToolContext, ToolError
from agents.tools.cron import CronRequest, CronTool
from bot.config.agent import BudgetConfig
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.scheduler import Scheduler
from bot.kernel.budget import REFRESH_EVERY, Budget
from bot.kernel.turn_outcome import SessionState
from bot.operator.cli import main
from bot.store.open import open_store
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
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
        view = await daemon.cron.add_job(CronRequest("every", "1h", "Report.", deliver_to="owner"))
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
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["status", "--config", config]) == 0  # stopped now
    assert "today (" in (out := capsys.readouterr().out) and ", lifted for today" in out


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


async def test_told_and_lifted_outlive_a_restart_and_reach_another_instance(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "perch.db")
    told: list[str] = []

    async def tell(text: str) -> bool:
        told.append(text)
        return True

    try:
        await store.add_usage("agent:main:dm:x", Usage(cost_usd=1.5))
        first = Budget(BudgetConfig(daily_usd=1.0), store, tell)
        assert "used up" in await first.notice()
        assert len(told) == 1
        again = Budget(BudgetConfig(daily_usd=1.0), store, tell)  # a restart, or a second one
        assert "used up" in await again.notice()
        assert len(told) == 1  # the owner heard it once today
        assert "Budget lifted" in await again.command("lift", is_owner=True)
        after = Budget(BudgetConfig(daily_usd=1.0), store, tell)
        assert await after.notice() == "" and after.lifted()
        assert "lifted for today" in after.status_line(await after.spent_today())
        tomorrow = Budget(
            BudgetConfig(daily_usd=1.0), store, tell, clock=lambda: time.time() + 86400
        )
        assert not tomorrow.lifted() and await tomorrow.notice() == ""  # a new day, nothing spent
    finally:
        await store.close()


async def test_spend_is_read_at_most_every_few_seconds_and_own_turns_count_at_once(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "perch.db")
    now = [time.time()]
    try:
        budget = Budget(BudgetConfig(daily_usd=1.0), store, clock=lambda: now[0])
        assert await budget.notice() == ""
        await store.add_usage("agent:main:dm:x", Usage(cost_usd=0.6))  # this daemon's turn
        await budget.after_run(SessionState("agent:main:dm:x", 2, 10, 0.6))
        await store.add_usage("agent:main:dm:y", Usage(cost_usd=0.6))  # spent elsewhere
        assert await budget.notice() == ""  # not seen yet: $0.60 counted
        now[0] += REFRESH_EVERY
        assert "used up ($1.20 spent)" in await budget.notice()  # read again: both
        now[0] += REFRESH_EVERY  # a turn ends when a read is due: the read has its cost
        await store.add_usage("agent:main:dm:x", Usage(cost_usd=0.3))
        await budget.after_run(SessionState("agent:main:dm:x", 4, 10, 0.3))
        assert await budget.spent_today() == pytest.approx(1.5)  # not counted twice
    finally:
        await store.close()


async def test_a_one_shot_job_due_during_a_pause_waits_and_runs_after_a_lift(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        assert daemon.store is not None and isinstance(daemon.scheduler, Scheduler)
        await daemon.store.add_usage("agent:main:dm:x", Usage(cost_usd=0.02))  # over $0.01
        scheduler = daemon.scheduler
        soon = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
        view = await daemon.cron.add_job(CronRequest("at", soon, "Remind me.", deliver_to="owner"))
        await scheduler.run_now(view.id)
        job = await scheduler.jobs.get(view.id)
        assert job is not None and job.enabled and job.last_status == "skipped"
        assert job.next_run_at is not None and job.next_run_at > time.time() + 500
        assert "looks again in 10 min" in (job.last_error or "")
        await chan.say("/budget lift", chat_id="owner1")
        await chan.wait_sent(1, timeout=30)
        await scheduler.run_now(view.id)
        job = await scheduler.jobs.get(view.id)
        assert job is not None and job.last_status == "delivered" and not job.enabled
        assert "[Scheduled job" in last_user_text(fake.requests[-1])


async def test_cron_tool_refuses_sub_minute_intervals_unless_allow_fast(tmp_path: Path) -> None:
    store = await open_store(tmp_path / "perch.db")
    try:
        tool = CronTool(JobBook(Config(), store))
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
