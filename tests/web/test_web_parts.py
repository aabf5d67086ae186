"""The dashboard's pure parts and its config and CLI: credentials, the failure limit, the
origin test, the chart geometry, the conversation view, the log ring, `web:` validation and
the control operations the dashboard added (`perch usage`, `perch stop`, `perch pairing deny`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import Message
from bot.config.errors import ConfigError
from bot.operator.cli import main
from bot.store.rows import UsageDay
from bot.web.auth import SESSION_SECONDS, Credentials, FailureLimit, safe_next, same_origin
from bot.web.chart import BOTTOM, HEIGHT, TOP, nice_ceiling, stacked_days, tokens_label
from bot.web.logtail import LogTail
from bot.web.views import conversation
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon

TOKEN = "a-dashboard-token-of-32-characters"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- credentials -------------------------------------------------------------------------


def test_a_session_cookie_is_ours_until_it_expires_or_the_token_changes() -> None:
    clock = Clock()
    credentials = Credentials(TOKEN, clock)
    cookie = credentials.new_session()
    session = credentials.session_id(cookie)
    assert session is not None and TOKEN not in cookie
    assert credentials.session_id(credentials.new_session()) != session  # each login its own
    assert Credentials("another-token-of-enough-length", clock).session_id(cookie) is None
    issued, nonce, mac = cookie.split(".")
    for forged in (
        f"{int(issued) + 1}.{nonce}.{mac}",  # a later issue time under the old MAC
        f"{issued}.{nonce}x.{mac}",
        f"{issued}.{nonce}.{mac[:-1]}0" if mac[-1] != "0" else f"{issued}.{nonce}.{mac[:-1]}1",
        f"{issued}.{nonce}",
        "",
        "...",
    ):
        assert credentials.session_id(forged) is None, forged
    clock.now += SESSION_SECONDS - 1
    assert credentials.session_id(cookie) == session
    clock.now += 2
    assert credentials.session_id(cookie) is None


def test_a_logged_out_session_is_refused_though_its_cookie_is_well_made() -> None:
    credentials = Credentials(TOKEN, Clock())
    cookie, other = credentials.new_session(), credentials.new_session()
    session = credentials.session_id(cookie)
    assert session is not None
    credentials.end_session(session)
    assert credentials.session_id(cookie) is None
    assert credentials.session_id(other) is not None  # another browser stays in
    assert Credentials(TOKEN, Clock()).session_id(other) is None  # a restart: nobody is in


def test_the_csrf_token_belongs_to_its_session() -> None:
    credentials = Credentials(TOKEN)
    one = credentials.session_id(credentials.new_session())
    two = credentials.session_id(credentials.new_session())
    assert one is not None and two is not None
    assert credentials.csrf_ok(one, credentials.csrf(one))
    assert not credentials.csrf_ok(one, credentials.csrf(two))
    assert not credentials.csrf_ok(one, "")
    assert credentials.token_ok(TOKEN) and not credentials.token_ok(TOKEN + " ")


@given(st.text(max_size=80))
def test_no_text_but_the_token_is_the_token(given_text: str) -> None:
    assert Credentials(TOKEN).token_ok(given_text) is (given_text == TOKEN)


def test_failures_are_counted_per_address_within_the_window() -> None:
    clock = Clock(100.0)
    limit = FailureLimit(limit=5, window=60.0, clock=clock)
    for _ in range(4):
        limit.failed("10.0.0.1")
    assert limit.retry_after("10.0.0.1") == 0
    limit.failed("10.0.0.1")
    assert limit.retry_after("10.0.0.1") == pytest.approx(60.0)
    assert limit.retry_after("10.0.0.2") == 0  # another address is not held back
    clock.now += 30
    assert limit.retry_after("10.0.0.1") == pytest.approx(30.0)
    clock.now += 30.5
    assert limit.retry_after("10.0.0.1") == 0  # the failures aged out


def test_failures_from_many_addresses_are_limited_together() -> None:
    clock = Clock(100.0)
    limit = FailureLimit(limit=5, window=60.0, clock=clock, overall=20)
    for n in range(20):
        assert limit.retry_after(f"127.0.0.{n + 2}") == 0
        limit.failed(f"127.0.0.{n + 2}")  # one each: no address reaches its own limit
    assert limit.retry_after("127.0.0.99") == pytest.approx(60.0)  # a fresh one is held too
    clock.now += 61
    assert limit.retry_after("127.0.0.99") == 0


@pytest.mark.parametrize(
    ("origin", "referer", "host", "same"),
    [
        ("http://127.0.0.1:8787", "", "127.0.0.1:8787", True),
        ("https://perch.example.org", "", "perch.example.org", True),
        ("", "http://127.0.0.1:8787/pairing", "127.0.0.1:8787", True),
        ("HTTP://LOCALHOST:8787", "", "localhost:8787", True),
        ("http://127.0.0.1:8788", "", "127.0.0.1:8787", False),  # another port: another origin
        ("http://evil.example", "http://127.0.0.1:8787/", "127.0.0.1:8787", False),  # Origin wins
        ("null", "", "127.0.0.1:8787", False),
        ("", "", "127.0.0.1:8787", False),
        ("file:///tmp/x.html", "", "127.0.0.1:8787", False),
        ("http://127.0.0.1:8787.evil.example", "", "127.0.0.1:8787", False),
        ("http://127.0.0.1:8787", "", "", False),
    ],
)
def test_a_change_must_come_from_the_dashboards_own_origin(
    origin: str, referer: str, host: str, same: bool
) -> None:
    assert same_origin(origin, referer, host) is same


@pytest.mark.parametrize(
    ("wanted", "safe"),
    [
        ("/pairing", "/pairing"),
        ("/sessions/view?key=agent%3Amain", "/sessions/view?key=agent%3Amain"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("", "/"),
    ],
)
def test_after_login_only_a_path_of_this_site_is_followed(wanted: str, safe: str) -> None:
    assert safe_next(wanted) == safe


@given(st.text(max_size=60))
def test_no_next_leads_off_the_site(wanted: str) -> None:
    target = safe_next(wanted)
    assert target.startswith("/") and not target.startswith("//") and "\\" not in target


# -- the usage chart ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ceiling"),
    [
        (0, 1),
        (0.3, 0.5),
        (1, 1),
        (1.01, 2),
        (2.2, 2.5),
        (3, 5),
        (7, 10),
        (180, 200),
        (12_345, 20_000),
    ],
)
def test_the_axis_ends_at_a_round_number(value: float, ceiling: float) -> None:
    assert nice_ceiling(value) == pytest.approx(ceiling)


def usage(day: str, model: str, tokens: int, cost: float = 0.0) -> UsageDay:
    return UsageDay(day, model, tokens, 0, 0, 0, cost)


def test_bars_stack_by_model_per_day_and_fill_the_axis() -> None:
    days = ["2026-01-01", "2026-01-02", "2026-01-03"]
    rows = [
        usage("2026-01-01", "b", 3000),
        usage("2026-01-01", "a", 1000),
        usage("2026-01-03", "a", 2000),
        usage("2025-12-31", "a", 9999),  # outside the days shown
    ]
    chart = stacked_days(days, rows, lambda r: r.input_tokens, tokens_label)
    assert chart.legend == [(0, "a"), (1, "b")]
    assert [(b.series, b.title) for b in chart.bars] == [
        (0, "2026-01-01 · a: 1k"),
        (1, "2026-01-01 · b: 3k"),
        (0, "2026-01-03 · a: 2k"),
    ]
    first, second, third = chart.bars
    plot = HEIGHT - TOP - BOTTOM
    assert first.x == second.x < third.x
    assert second.y + second.height == pytest.approx(first.y)  # b sits on a
    assert first.height + second.height == pytest.approx(plot * 4000 / 5000)  # axis up to 5k
    assert [t.label for t in chart.ticks] == ["0", "1.25k", "2.5k", "3.75k", "5k"]
    assert chart.total == "6k"
    empty = stacked_days(days, [], lambda r: r.cost_usd, tokens_label)
    assert empty.empty and empty.legend == [] and len(empty.ticks) == 5


# -- the conversation --------------------------------------------------------------------


def test_a_conversation_is_shown_as_its_user_saw_it_with_tools_folded() -> None:
    messages: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": "what's in <notes>?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "private reasoning", "signature": "s"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "n.md"}},
                {"type": "tool_use", "id": "t2", "name": "exec", "input": {"cmd": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "buy milk"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "denied"}],
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "<thinking>hmm</thinking>Your notes say: buy milk."}
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "NO_REPLY"}]},
    ]
    entries = conversation(messages)
    assert [(e.role, e.text) for e in entries] == [
        ("user", "what's in <notes>?"),
        ("assistant", "Let me look."),
        ("assistant", "Your notes say: buy milk."),
    ]
    read, run = entries[1].tools
    assert (read.name, read.result, read.is_error, read.answered) == (
        "read_file",
        "buy milk",
        False,
        True,
    )
    assert '"path": "n.md"' in read.input
    assert (run.name, run.result, run.is_error) == ("exec", "denied", True)


# -- the log ring ------------------------------------------------------------------------


async def test_the_log_ring_keeps_the_last_lines_redacted_from_any_thread() -> None:
    tail = LogTail(["my-own-secret-value"], capacity=5)
    logger = logging.getLogger("perch.test.ring")
    logger.addHandler(tail)
    logger.setLevel(logging.INFO)
    try:
        waiting = asyncio.create_task(tail.wait_after(0, timeout=5))
        await asyncio.sleep(0)  # the waiter is registered before the record comes
        worker = threading.Thread(target=logger.warning, args=("uses my-own-secret-value",))
        worker.start()
        worker.join()
        [line] = await waiting
        assert line.level == "WARNING" and line.text.endswith("uses [REDACTED]")
        for n in range(7):
            logger.info("line %d", n)
        kept = tail.after(0)
        assert [line.seq for line in kept] == [4, 5, 6, 7, 8]
        assert tail.after(7)[0].text.endswith("line 6")
        assert tail.problems() == []  # the warning fell out of the ring
        logger.error("broken")
        assert [p.text.split(": ")[-1] for p in tail.problems()] == ["broken"]
        assert await tail.wait_after(tail.after(0)[-1].seq, timeout=0.05) == []
    finally:
        logger.removeHandler(tail)


# -- config and CLI ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"web.listen": "0.0.0.0:8787"}, "set web.token"),
        ({"web.listen": "[::]:8787"}, "set web.token"),
        ({"web.listen": "perch.example.org:8787"}, "set web.token"),
        ({"web.listen": "8787"}, "expected host:port"),
        ({"web.token": "short"}, "at least 16 characters"),
        ({"web.colour": "blue"}, "web.colour"),
    ],
)
def test_bad_web_settings_are_one_line_config_errors(
    tmp_path: Path, settings: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, "http://127.0.0.1:1", {"web.enabled": True, **settings})
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_the_dashboard_is_off_by_default_and_on_loopback_when_on(tmp_path: Path) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:1")
    assert not config.web.enabled and config.web.listen == "127.0.0.1:8787"
    assert config.web.token is None
    public = {"web.enabled": True, "web.listen": "0.0.0.0:8787", "web.token": TOKEN}
    assert make_config(tmp_path, "http://127.0.0.1:1", public).web.token == TOKEN
    assert TOKEN in make_config(tmp_path, "http://127.0.0.1:1", public).secret_values()


def test_perch_refuses_a_public_dashboard_without_a_token_with_exit_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("web: {enabled: true, listen: '0.0.0.0:8787'}\n")
    assert main(["status", "--config", str(path)]) == 78
    assert "web: listen 0.0.0.0:8787 is reachable from other machines" in capsys.readouterr().err


async def perch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_usage_per_day_and_model_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.allow_from": ["u1"]}
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as d,
    ):
        config = str(d.config.source)
        fake.queue(Reply.text("hi", usage={"input_tokens": 120, "output_tokens": 30}))
        await chan.say("hello", chat_id="u1")
        await chan.wait_sent(1)
        code, out, _ = await perch(capsys, "usage", "--config", config)
        today = time.strftime("%Y-%m-%d", time.gmtime())
        assert code == 0 and f"{today}  claude-sonnet-5-5" in out and "120" in out
        code, out, _ = await perch(capsys, "usage", "--json", "--days", "7", "--config", config)
        data = json.loads(out)
        assert data["days"] == 7 and [r["model"] for r in data["rows"]] == ["claude-sonnet-5-5"]
        assert data["rows"][0]["input_tokens"] == 120 and data["rows"][0]["day"] == today
        code, _, err = await perch(capsys, "usage", "--days", "0", "--config", config)
        assert code == 2 and "--days must be a whole number" in err
    code, out, _ = await perch(capsys, "usage", "--config", config)  # no daemon: the same
    assert code == 0 and f"{today}  claude-sonnet-5-5" in out


async def test_perch_status_names_the_dashboards_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = {"web": {"enabled": True, "listen": "127.0.0.1:0", "token": TOKEN}}
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}, overrides) as d:
        code, out, _ = await perch(capsys, "status", "--config", str(d.config.source))
        assert code == 0 and f"  dashboard: {d.parts.web.url}\n" in out
        assert d.parts.web.url.startswith("http://127.0.0.1:") and ":0/" not in d.parts.web.url


async def test_stop_and_pairing_deny_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    held = asyncio.Event()
    overrides = {"channels.telegram.allow_from": ["u1"]}
    key = "agent:main:telegram:bot:dm:u1"
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as d,
    ):
        assert d.gateway is not None
        config = str(d.config.source)
        code, out, err = await perch(capsys, "stop", key, "--config", config)
        assert code == 1 and out == f"Nothing to stop. ({key})\n"
        fake.queue(Reply.text("late", hold=held))
        await chan.say("take your time", chat_id="u1")
        await fake.wait_requests(1)
        code, out, err = await perch(capsys, "stop", key, "--config", config)
        assert code == 0 and out == f"Stopped. ({key})\n"
        async with asyncio.timeout(5):
            await d.gateway.wait_idle()
        held.set()
        code, _, err = await perch(capsys, "stop", "not a key", "--config", config)
        assert code == 2 and err.startswith("perch stop: ")
        await chan.say("let me in", chat_id="stranger")
        [pending] = await d.store.pairing_requests()  # type: ignore[union-attr]
    code, out, _ = await perch(capsys, "stop", key, "--config", config)
    assert code == 1  # no daemon, no shared store: nothing runs
    code, out, _ = await perch(
        capsys, "pairing", "deny", "telegram", pending.code, "--config", config
    )
    assert code == 0 and out.startswith(f"Denied code {pending.code} of stranger on telegram")
    code, _, err = await perch(
        capsys, "pairing", "deny", "telegram", pending.code, "--config", config
    )
    assert code == 1 and "No pending code" in err
