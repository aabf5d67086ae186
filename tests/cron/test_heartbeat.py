"""Heartbeats: skip rules, suppression rules, targets and resilience, through the real gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.cron.heartbeat import KEEP_RUNS, ActiveHours, Heartbeat, checklist, has_content
from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from bot.kernel.workspace import bootstrap_dir
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OWNER = {
    "channels.telegram.dm_policy": "open",
    "channels.telegram.allow_from": ["owner1", "*"],
}
TASKS = "# Heartbeat\n<!-- secret example: water the plants -->\n- Check the server status page\n"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def heartbeat_of(daemon: Daemon, tasks: str | None = TASKS) -> Heartbeat:
    assert daemon.scheduler is not None and daemon.scheduler.heartbeat is not None
    if tasks is not None:
        (daemon.config.workspace / "HEARTBEAT.md").write_text(tasks)
    return daemon.scheduler.heartbeat


async def settle(daemon: Daemon) -> None:
    """Wait until no turn runs (a reply is sent a moment before its turn ends)."""
    assert daemon.gateway is not None
    await asyncio.wait_for(daemon.gateway.wait_idle(), 5)


def answer(fake: FakeAnthropic, text: str) -> None:
    fake.default = lambda body: Reply.text(text)


# -- HEARTBEAT.md content ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "real"),
    [
        ("", False),
        ("# Heartbeat\n\n## Tasks\n", False),
        ("<!-- just a comment\nover lines -->\n", False),
        ("- [ ]\n* [ ]\n+ [ ]\n- [x]\n-\n1.\n---\n===\n", False),
        ("<!-- unclosed comment\n- Check mail", False),
        ("- [ ] Check mail", True),
        ("Check mail", True),
        ("#hashtag is not a heading", True),
        ("# Tasks\n<!-- c -->\n  - water the plants  \n", True),
    ],
)
def test_only_real_lines_count_as_content(text: str, real: bool) -> None:
    assert has_content(text) is real


def test_the_shipped_template_costs_nothing() -> None:
    assert not has_content((bootstrap_dir() / "HEARTBEAT.md").read_text())


def test_comments_are_not_shown_to_the_model() -> None:
    assert checklist(TASKS) == "# Heartbeat\n\n- Check the server status page"


_EMPTY_LINES = st.sampled_from(["", "  ", "# H", "### Sub heading", "- [ ]", "* [x]", "---"])


@given(
    st.lists(st.one_of(_EMPTY_LINES, st.text(max_size=40).map(lambda t: f"<!--{t}-->"))),
    st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=20),
)
def test_empty_lines_never_count_and_one_real_line_does(lines: list[str], word: str) -> None:
    assert not has_content("\n".join(lines))
    assert has_content("\n".join([*lines, f"- {word}"]))


# -- active hours --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "moment", "inside"),
    [
        ("08:00-22:00", "08:00", True),
        ("08:00-22:00", "21:59", True),
        ("08:00-22:00", "22:00", False),
        ("08:00-22:00", "07:59", False),
        ("22:00-06:00", "23:30", True),
        ("22:00-06:00", "00:00", True),
        ("22:00-06:00", "05:59", True),
        ("22:00-06:00", "06:00", False),
        ("22:00-06:00", "12:00", False),
        ("00:00-00:00", "13:00", True),
    ],
)
def test_active_hours_include_the_start_exclude_the_end_and_wrap_midnight(
    window: str, moment: str, inside: bool
) -> None:
    assert ActiveHours.parse(window).contains(time.fromisoformat(moment)) is inside


async def test_outside_active_hours_in_the_heartbeat_timezone_no_model_call(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {
        **OWNER,
        "heartbeat.active_hours": "08:00-22:00",
        "heartbeat.timezone": "Europe/Berlin",
    }
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        beat = heartbeat_of(daemon)
        beat.clock = lambda: datetime(2025, 1, 10, 21, 30, tzinfo=UTC)  # 22:30 in Berlin
        assert await beat.tick() == "outside_hours"
        assert fake.requests == []
        beat.clock = lambda: datetime(2025, 1, 10, 20, 30, tzinfo=UTC)  # 21:30 in Berlin
        answer(fake, "HEARTBEAT_OK")
        assert await beat.tick() == "silent"
    assert "Friday 2025-01-10 21:30 Europe/Berlin" in last_user_text(fake.requests[0])


# -- runs and suppression ------------------------------------------------------------------


async def test_empty_heartbeat_file_makes_no_model_call(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon, tasks=None)  # the seeded template: comments only
        assert await beat.tick() == "empty"
    assert fake.requests == [] and chan.sent == []


async def test_alert_goes_to_the_owner_as_a_dm_with_the_checklist_in_the_prompt(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon)
        answer(fake, "The status page says the API is down.")
        assert await beat.tick() == "delivered"
    [sent] = chan.sent
    assert (sent.chat.chat_id, sent.chat.kind, sent.text) == (
        "owner1",
        "dm",
        "The status page says the API is down.",
    )
    prompt = last_user_text(fake.requests[0])
    assert "reply exactly HEARTBEAT_OK" in prompt
    assert "- Check the server status page" in prompt and "water the plants" not in prompt


@pytest.mark.parametrize(
    "reply",
    [
        "HEARTBEAT_OK",
        "**HEARTBEAT_OK**",
        "Nothing new. HEARTBEAT_OK",
        "HEARTBEAT_OK. Checked the status page: all green.",
        "NO_REPLY",
    ],
)
async def test_quiet_replies_are_dropped(tmp_path: Path, fake: FakeAnthropic, reply: str) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        answer(fake, reply)
        assert await heartbeat_of(daemon).tick() == "silent"
    assert len(fake.requests) == 1 and chan.sent == []


async def test_long_text_beside_heartbeat_ok_is_delivered_without_the_token(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    report = "Disk usage report: " + "the volume is filling up. " * 15
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        answer(fake, f"{report}\n\nHEARTBEAT_OK")
        assert await heartbeat_of(daemon).tick() == "delivered"
    assert chan.texts() == [report.strip()]


# -- targets -------------------------------------------------------------------------------


async def test_target_last_is_the_most_recently_active_chat(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(
        tmp_path, fake, {"telegram": chan}, {**OWNER, "heartbeat.target": "last"}
    ) as daemon:
        await chan.say("hello", chat_id="u7")
        await chan.wait_sent(1)
        await settle(daemon)
        answer(fake, "Reminder: the report is due.")
        assert await heartbeat_of(daemon).tick() == "delivered"
    assert [(s.chat.chat_id, s.text) for s in chan.sent][-1] == (
        "u7",
        "Reminder: the report is due.",
    )


async def test_explicit_target_and_none(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    explicit = {**OWNER, "heartbeat.target": {"channel": "telegram", "to": "group:g9"}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, explicit) as daemon:
        answer(fake, "Alert!")
        assert await heartbeat_of(daemon).tick() == "delivered"
    assert (chan.sent[0].chat.kind, chan.sent[0].chat.chat_id) == ("group", "g9")

    chan = MemoryChannel("telegram")
    quiet = {**OWNER, "heartbeat.target": "none"}
    (tmp_path / "b").mkdir()
    async with running_daemon(tmp_path / "b", fake, {"telegram": chan}, quiet) as daemon:
        assert await heartbeat_of(daemon).tick() == "silent"
    assert len(fake.requests) == 2 and chan.sent == []


async def test_no_owner_configured_skips_without_a_model_call(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}) as daemon:
        assert await heartbeat_of(daemon).tick() == "no_target"
    assert fake.requests == []


# -- busy, failures, history ---------------------------------------------------------------


async def test_busy_owner_chat_skips_and_the_next_tick_runs(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon)
        await chan.say("a long question", chat_id="owner1")
        await fake.wait_requests(1)
        assert await beat.tick() == "busy"
        assert len(fake.requests) == 1  # no model call for the heartbeat
        gate.set()
        await chan.wait_sent(1)
        await settle(daemon)
        answer(fake, "Now something to say.")
        assert await beat.tick() == "delivered"


async def test_a_heartbeat_still_running_makes_the_next_one_skip(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("HEARTBEAT_OK", hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon)
        first = asyncio.create_task(beat.tick())
        await fake.wait_requests(1)
        assert await beat.tick() == "busy"
        gate.set()
        assert await first == "silent"
    assert len(fake.requests) == 1


async def test_a_failing_heartbeat_does_not_stop_the_next(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon)
        fake.queue(Reply.http_error(400, "invalid_request_error", "bad request"))
        assert await beat.tick() == "error"
        answer(fake, "Back to normal: one alert.")
        assert await beat.tick() == "delivered"
    assert chan.texts() == ["Back to normal: one alert."]


async def test_heartbeat_history_is_kept_short(tmp_path: Path, fake: FakeAnthropic) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        beat = heartbeat_of(daemon)
        answer(fake, "HEARTBEAT_OK")
        for _ in range(KEEP_RUNS + 3):
            assert await beat.tick() == "silent"
        assert daemon.store is not None
        session = await daemon.store.session(str(SessionKey.heartbeat("main")))
        # Each run trims to the last KEEP_RUNS runs before adding its own.
        assert await daemon.store.count_messages(session.id) == 2 * (KEEP_RUNS + 1)
    # The last request carried KEEP_RUNS earlier runs plus its own prompt.
    assert len(fake.requests[-1]["messages"]) == 2 * KEEP_RUNS + 1


async def test_scheduled_heartbeat_fires_on_its_own_and_shows_in_status(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides: dict[str, Any] = {**OWNER, "heartbeat.every": "1s"}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        heartbeat_of(daemon)
        assert "next_heartbeat" in daemon.status()
        answer(fake, "Scheduled alert.")
        assert await chan.wait_sent(1, timeout=5) == ["Scheduled alert."]


async def test_heartbeats_keep_clock_times_across_a_restart(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    # Counted from each start, a daemon restarted more often than `every` would never beat.
    overrides: dict[str, Any] = {**OWNER, "heartbeat.every": "30m", "heartbeat.timezone": "UTC"}
    shown: list[str] = []
    for _ in range(2):
        now = datetime.now(UTC)
        async with running_daemon(
            tmp_path, fake, {"telegram": MemoryChannel("telegram")}, overrides
        ) as daemon:
            shown.append(daemon.status()["next_heartbeat"])
        when = datetime.strptime(shown[-1], "%Y-%m-%d %H:%M UTC").replace(tzinfo=UTC)
        assert when.minute in (0, 30) and 0 < (when - now).total_seconds() <= 1800, (shown, now)
