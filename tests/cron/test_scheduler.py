"""Cron jobs end to end: real daemon, gateway and store, a memory channel, the fake model.

Times are real but short (a job due in a fraction of a second); restarts and missed runs are
arranged by writing jobs whose times lie in the past, never by waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import bot.operator.cron_cli  # noqa: F401  (registers `perch cron`)
from agents.tools.cron import CronRequest
from bot.cron.jobs import CronJob, CronJobs, CronRun, create_job
from bot.cron.scheduler import Scheduler
from bot.daemon import Daemon
from bot.kernel.routing import encode_chat
from bot.kernel.sessions import SessionKey
from bot.operator.cli import main as perch
from bot.store.open import open_store
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon

OWNER = {
    "channels.telegram.dm_policy": "open",
    "channels.telegram.allow_from": ["owner1", "*"],
}
HOUR = 3600.0


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def scheduler_of(daemon: Daemon) -> Scheduler:
    assert daemon.scheduler is not None
    return daemon.scheduler


def answer(fake: FakeAnthropic, text: str) -> None:
    fake.default = lambda body: Reply.text(text)


async def add(daemon: Daemon, **fields: Any) -> str:
    request = CronRequest(**{"kind": "at", "expr": "+0.2s", "message": "Ping.", **fields})
    assert daemon.cron is not None
    view = await daemon.cron.add_job(request)
    await scheduler_of(daemon).sync()  # planned now (the book's change wakes it anyway)
    return view.id


async def job(daemon: Daemon, job_id: str) -> CronJob:
    found = await scheduler_of(daemon).jobs.get(job_id)
    assert found is not None
    return found


async def runs(daemon: Daemon, job_id: str) -> list[CronRun]:
    return list(reversed(await scheduler_of(daemon).jobs.runs(job_id)))


async def seed(tmp_path: Path, *requests: tuple[CronRequest, float]) -> list[str]:
    """Write jobs into the daemon's database before it starts, each created at a given time."""
    store = await open_store(tmp_path / "data" / "perch.db")
    try:
        jobs = CronJobs(store)
        return [
            (await create_job(jobs, request, default_tz="UTC", now=created)).id
            for request, created in requests
        ]
    finally:
        await store.close()


# -- running and delivering ----------------------------------------------------------------


async def test_isolated_job_runs_in_its_own_session_and_delivers_to_its_chat(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        answer(fake, "Time to call Alex!")
        job_id = await add(
            daemon,
            name="call Alex",
            message="Remind the user to call Alex.",
            deliver_to=encode_chat(chan.chat("u5")),
        )
        assert job_id in (daemon.status().get("next_cron") or "")
        await chan.wait_sent(1)
        await scheduler_of(daemon).settle()
        assert (chan.sent[0].chat.chat_id, chan.sent[0].text) == ("u5", "Time to call Alex!")
        done = await job(daemon, job_id)
        assert not done.enabled and done.next_run_at is None and done.last_status == "delivered"
        assert [r.status for r in await runs(daemon, job_id)] == ["delivered"]
        assert daemon.store is not None
        session = await daemon.store.session(str(SessionKey.cron("main", job_id)))
        assert await daemon.store.count_messages(session.id) == 2
    body = fake.requests[0]
    assert "focused worker agent" in body["system"][0]["text"]  # minimal prompt
    prompt = last_user_text(body)
    assert "[Scheduled job" in prompt and "Remind the user to call Alex." in prompt
    assert "NO_REPLY" in prompt


async def test_no_reply_posts_nothing_and_is_recorded(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        answer(fake, "NO_REPLY")
        job_id = await add(daemon, deliver_to="owner")
        await fake.wait_requests(1)
        await scheduler_of(daemon).settle()
        [run] = await runs(daemon, job_id)
        assert (run.status, run.detail) == ("ok", "NO_REPLY: nothing sent")
    assert chan.sent == []


async def test_chat_job_runs_inside_the_chat_session_and_answers_there(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("I need to call Alex later", chat_id="owner1")
        await chan.wait_sent(1)
        answer(fake, "Now is a good time to call Alex.")
        job_id = await add(daemon, session="chat", deliver_to="owner", message="Nudge: Alex.")
        await chan.wait_sent(2)
        await scheduler_of(daemon).settle()
        assert [r.status for r in await runs(daemon, job_id)] == ["delivered"]
    assert chan.sent[1].chat.chat_id == "owner1"
    history = fake.requests[1]["messages"]
    assert "I need to call Alex later" in history[0]["content"][-1]["text"]
    assert "Nudge: Alex." in last_user_text(fake.requests[1])
    assert "focused worker agent" not in fake.requests[1]["system"][0]["text"]  # full prompt


async def test_chat_job_waits_behind_a_running_turn(tmp_path: Path, fake: FakeAnthropic) -> None:
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body)[-20:], hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("a long question", chat_id="owner1")
        await fake.wait_requests(1)
        job_id = await add(
            daemon, expr="+1h", session="chat", deliver_to="owner", message="Queued nudge."
        )
        await scheduler_of(daemon).run_now(job_id)  # it queues its turn and returns
        [run] = await runs(daemon, job_id)
        assert run.status == "ok" and "queued behind a running turn" in run.detail
        gate.set()
        await chan.wait_sent(2)
    assert "Queued nudge." in last_user_text(fake.requests[1])


# -- failures and retries ------------------------------------------------------------------


async def test_transient_failure_is_retried_then_delivered(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        scheduler_of(daemon).retry_delays = (0.05, 0.05, 0.05)
        fake.queue(Reply.http_error(400, "invalid_request_error", "model hiccup"))
        answer(fake, "Second time lucky.")
        job_id = await add(daemon, deliver_to="owner")
        await chan.wait_sent(1)
        await scheduler_of(daemon).settle()
        statuses = [(r.status, r.detail) for r in await runs(daemon, job_id)]
        done = await job(daemon, job_id)
    assert statuses[0][0] == "error" and "retry 1 of 3 in 0.05 s" in statuses[0][1]
    assert statuses[1] == ("delivered", "to telegram dm owner1")
    assert not done.enabled and done.failures == 0


async def test_retries_give_up_after_three_and_the_one_shot_is_disabled(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        scheduler_of(daemon).retry_delays = (0.02, 0.02, 0.02)
        fake.default = lambda body: Reply.http_error(400, "invalid_request_error", "broken")
        job_id = await add(daemon, deliver_to="owner")
        await fake.wait_requests(4)
        await scheduler_of(daemon).settle()
        history = await runs(daemon, job_id)
        done = await job(daemon, job_id)
    assert [r.status for r in history] == ["error"] * 4
    assert "gave up after 3 retries" in history[-1].detail
    assert not done.enabled and done.last_status == "error"
    assert len(fake.requests) == 4 and chan.sent == []


async def test_undeliverable_target_fails_without_a_model_call(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}) as daemon:  # no allow_from
        scheduler_of(daemon).retry_delays = ()
        job_id = await add(daemon, expr="+1h", deliver_to="owner")
        await scheduler_of(daemon).run_now(job_id)
        [run] = await runs(daemon, job_id)
        assert not (await job(daemon, job_id)).enabled
        assert "next_cron" not in daemon.status()
    assert run.status == "error" and "no owner to deliver to" in run.detail
    assert fake.requests == []


# -- restarts ------------------------------------------------------------------------------


async def test_job_created_by_the_tool_survives_a_restart_and_fires_once(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    due = datetime.now(UTC) + timedelta(seconds=2)
    fake.queue(
        Reply.tool_use(
            [("cron", {"action": "add", "at": due.isoformat(), "message": "Remind: call Alex."})]
        ),
        Reply.text("I'll remind you."),
    )
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("remind me in 2 seconds to call Alex", chat_id="u3")
        assert await chan.wait_sent(1) == ["I'll remind you."]
        [stored] = await scheduler_of(daemon).jobs.all()
    assert stored.enabled and stored.deliver_to == encode_chat(chan.chat("u3"))
    assert time.time() < due.timestamp(), "the first daemon took too long to stop"

    chan = MemoryChannel("telegram")
    answer(fake, "Reminder: call Alex.")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        assert await chan.wait_sent(1, timeout=6) == ["Reminder: call Alex."]
        await scheduler_of(daemon).settle()
        assert chan.sent[0].chat.chat_id == "u3"
        assert [r.status for r in await runs(daemon, stored.id)] == ["delivered"]
    requests = len(fake.requests)

    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        assert (await job(daemon, stored.id)).enabled is False
        assert "next_cron" not in daemon.status()
    assert len(fake.requests) == requests and chan.sent == []


async def test_missed_one_shot_runs_within_grace_and_older_is_marked_missed(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    now = time.time()
    recent, old = await seed(
        tmp_path,
        (CronRequest("at", "+1h", "Recent reminder.", deliver_to="owner"), now - 3 * HOUR),
        (CronRequest("at", "+1h", "Ancient reminder.", deliver_to="owner"), now - 26 * HOUR),
    )
    chan = MemoryChannel("telegram")
    answer(fake, "Recent reminder, a bit late.")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        assert await chan.wait_sent(1) == ["Recent reminder, a bit late."]
        await scheduler_of(daemon).settle()
        assert [r.status for r in await runs(daemon, recent)] == ["delivered"]
        [missed] = await runs(daemon, old)
        assert missed.status == "missed" and "more than 24 h late" in missed.detail
        assert not (await job(daemon, old)).enabled
    assert len(fake.requests) == 1
    assert "Recent reminder." in last_user_text(fake.requests[0])

    config = tmp_path / "config.yaml"
    assert await asyncio.to_thread(perch, ["cron", "list", "--config", str(config)]) == 0
    listing = capsys.readouterr().out
    assert f"{old}  at " in listing and "[MISSED]" in listing and "run " in listing
    assert "[done]" in listing


async def test_recurring_job_missed_many_times_runs_once(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    now = time.time()
    [job_id] = await seed(
        tmp_path,
        (CronRequest("every", "1h", "Hourly check.", deliver_to="owner"), now - 5.5 * HOUR),
    )
    chan = MemoryChannel("telegram")
    answer(fake, "Checked.")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.wait_sent(1)
        await scheduler_of(daemon).settle()
        [run] = await runs(daemon, job_id)
        after = await job(daemon, job_id)
        assert job_id in (daemon.status().get("next_cron") or "")
    assert run.status == "delivered" and "ran once for 5 missed times" in run.detail
    assert after.enabled and after.next_run_at is not None
    # Back on the hourly grid, in the future: 6 hours after creation.
    assert after.next_run_at == pytest.approx(now - 5.5 * HOUR + 6 * HOUR)
    assert len(fake.requests) == 1


# -- perch cron ----------------------------------------------------------------------------


def test_cli_adds_lists_and_removes_jobs_without_a_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(make_config(tmp_path, "http://127.0.0.1:9").source)
    assert (
        perch(
            [
                "cron",
                "add",
                "--cron",
                "0 9 * * 1-5",
                "--tz",
                "Europe/Berlin",
                "-m",
                "Standup",
                "--name",
                "standup",
                "--to",
                "telegram:123",
                "--config",
                config,
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert "Added job" in out and "cron '0 9 * * 1-5' (Europe/Berlin)" in out
    assert "telegram is not enabled" in err
    job_id = out.split("Added job ")[1].split(":")[0]

    assert perch(["cron", "list", "--config", config]) == 0
    out = capsys.readouterr().out
    assert f"{job_id} 'standup'" in out and "[active]" in out and "result to: telegram:123" in out

    assert perch(["cron", "--config", config, "add", "--at", "2020-01-01T00:00", "-m", "x"]) == 2
    assert "in the past" in capsys.readouterr().err
    assert (
        perch(["cron", "add", "--every", "5m", "-m", "x", "--to", "fax:1", "--config", config]) == 2
    )
    assert "unknown or disabled channel 'fax'" in capsys.readouterr().err
    # Bytes that are not UTF-8 (argv decoded with surrogateescape): a plain error, no job.
    bad = b"ping \xff".decode("utf-8", "surrogateescape")
    assert perch(["cron", "add", "--every", "5m", "-m", bad, "--config", config]) == 2
    assert "'ping \ufffd' is not valid UTF-8 text" in capsys.readouterr().err

    assert perch(["cron", "rm", job_id, "--config", config]) == 0
    assert perch(["cron", "rm", job_id, "--config", config]) == 1
    capsys.readouterr()
    assert perch(["cron", "list", "--config", config]) == 0
    assert "No cron jobs" in capsys.readouterr().out


async def test_cli_cron_changes_reach_the_running_daemon_at_once(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    answer(fake, "From the CLI job.")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        config = str(daemon.config.source)
        args = ["cron", "add", "--at", "+1h", "-m", "Later.", "--config", config]
        assert await asyncio.to_thread(perch, args) == 0
        out = capsys.readouterr().out
        later = out.split("Added job ")[1].split(":")[0]
        assert "Scheduled in the running daemon." in out
        assert later in (daemon.status().get("next_cron") or "")  # no polling needed
        assert await asyncio.to_thread(perch, ["cron", "remove", later, "--config", config]) == 0
        assert "next_cron" not in daemon.status()

        args = ["cron", "add", "--at", "+0.5s", "-m", "Soon.", "--config", config]
        assert await asyncio.to_thread(perch, args) == 0
        assert await chan.wait_sent(1) == ["From the CLI job."]
    assert chan.sent[0].chat.chat_id == "owner1"


async def test_running_daemon_notices_jobs_written_by_another_process(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    async with running_daemon(tmp_path, fake, {"telegram": MemoryChannel("telegram")}, OWNER) as d:
        scheduler = scheduler_of(d)
        other = await open_store(d.config.db_path)  # another writer, as a second process is
        try:
            request = CronRequest("at", "+1h", "Later.", deliver_to="owner")
            job_ = await create_job(CronJobs(other), request, default_tz="UTC", now=time.time())
            assert await scheduler.poll() is True
            assert job_.id in (d.status().get("next_cron") or "")
            assert await CronJobs(other).remove(job_.id)
            assert await scheduler.poll() is True
            assert "next_cron" not in d.status()
            assert await scheduler.poll() is False  # nothing changed since
        finally:
            await other.close()
