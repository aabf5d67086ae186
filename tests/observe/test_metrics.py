"""Prometheus metrics end to end: a real daemon, scripted turns against the fake model, and
`GET /metrics` scraped with a real HTTP client and parsed with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agents.model import Usage
from agents.pricing import cost_usd
from agents.tools.cron import CronRequest
from bot.config.errors import ConfigError
from bot.config.paths import socket_path
from bot.daemon import Daemon, StartupError
from bot.kernel.routing import encode_chat
from bot.operator.control_client import call
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon

MODEL = "claude-sonnet-5-5"
COST = f"perch_model_cost_usd_total{{model={MODEL},provider=anthropic}}"
OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
METRICS = {
    **OPEN_DMS,
    "metrics.enabled": True,
    "metrics.listen": "127.0.0.1:0",
    "agent.budget.daily_usd": 100,  # the spend gauge follows each turn's cost at once
}
TOKEN = "a-scrape-token-of-32-characters!"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def endpoint(daemon: Daemon) -> str:
    assert daemon.parts is not None and daemon.parts.metrics is not None
    return daemon.parts.metrics.url


async def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


async def scrape(daemon: Daemon, token: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    status, content_type, text = await get(endpoint(daemon), headers)
    assert status == 200 and content_type.startswith("text/plain"), (status, text)
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples) -> dict[str, float]:
    """Every `perch_*` counter series that changed, as `name{k=v,...}` -> by how much."""
    out: dict[str, float] = {}
    for key, now in after.items():
        name, labels = key
        if not name.startswith("perch_") or not name.endswith(("_total", "_count")):
            continue
        delta = now - before.get(key, 0.0)
        if delta:
            shown = ",".join(f"{k}={v}" for k, v in sorted(labels))
            out[f"{name}{{{shown}}}"] = round(delta, 9)
    return out


def usage(inp: int, out: int) -> dict[str, int]:
    return {"input_tokens": inp, "output_tokens": out}


async def test_counters_move_by_exactly_what_the_scripted_turns_did(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, METRICS) as daemon:
        before = await scrape(daemon)
        # A turn with three tool calls (one works, one fails, one is made up), then a reply.
        fake.queue(
            Reply.tool_use(
                [
                    ("read_file", {"path": "SOUL.md"}),
                    ("read_file", {"path": "no-such-file.md"}),
                    ("launch_rockets", {}),
                ],
                usage=usage(100, 20),
            ),
            Reply.text("Read it.", usage=usage(150, 5)),
        )
        await chan.say("read your soul")
        await chan.wait_sent(1)
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        after_tools = await scrape(daemon)
        assert moved(before, after_tools) == {
            "perch_turns_total{channel=telegram,outcome=ok}": 1,
            "perch_turn_duration_seconds_count{channel=telegram}": 1,
            f"perch_model_calls_total{{model={MODEL},outcome=ok,provider=anthropic}}": 2,
            f"perch_model_tokens_total{{kind=input,model={MODEL},provider=anthropic}}": 250,
            f"perch_model_tokens_total{{kind=output,model={MODEL},provider=anthropic}}": 25,
            COST: pytest.approx(cost_usd(MODEL, Usage(250, 25))),
            "perch_tool_calls_total{outcome=ok,tool=read_file}": 1,
            "perch_tool_calls_total{outcome=error,tool=read_file}": 1,
            "perch_tool_calls_total{outcome=error,tool=unknown}": 1,
            "perch_channel_sends_total{channel=telegram,outcome=ok}": 1,
        }
        cost = value(after_tools, "perch_model_cost_usd_total", model=MODEL, provider="anthropic")
        assert cost > 0
        assert value(after_tools, "perch_budget_spent_usd_today") == pytest.approx(cost)
        assert value(after_tools, "perch_channel_up", channel="telegram") == 1
        assert value(after_tools, "perch_runs_active") == 0
        assert value(after_tools, "perch_inbox_pending") == 0

        # A failed model call: the turn ends in error and the user is told.
        fake.queue(Reply.http_error(400, "invalid_request_error", "prompt is too long"))
        await chan.say("a question too long")
        await chan.wait_sent(2)
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        after_error = await scrape(daemon)
        assert moved(after_tools, after_error) == {
            "perch_turns_total{channel=telegram,outcome=error}": 1,
            "perch_turn_duration_seconds_count{channel=telegram}": 1,
            f"perch_model_calls_total{{model={MODEL},outcome=bad_request,provider=anthropic}}": 1,
            "perch_channel_sends_total{channel=telegram,outcome=ok}": 1,
        }

        # /stop while the model is still answering: a cancelled turn and the "Stopped." notice.
        gate = asyncio.Event()
        fake.queue(Reply.text("too late", hold=gate))
        await chan.say("take your time")
        await fake.wait_requests(4)
        busy = await scrape(daemon)
        assert value(busy, "perch_runs_active") == 1
        assert value(busy, "perch_inbox_pending") == 1
        await chan.say("/stop")
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        gate.set()
        after_stop = await scrape(daemon)
        assert chan.texts()[-1] == "Stopped."
        assert moved(after_error, after_stop) == {
            "perch_turns_total{channel=telegram,outcome=cancelled}": 1,
            "perch_turn_duration_seconds_count{channel=telegram}": 1,
            f"perch_model_calls_total{{model={MODEL},outcome=cancelled,provider=anthropic}}": 1,
            "perch_channel_sends_total{channel=telegram,outcome=ok}": 1,
        }
        assert value(after_stop, "perch_inbox_pending") == 0

        # A cron job: an isolated turn (no chat) whose result is delivered to a chat.
        fake.default = lambda body: Reply.text("Time to stretch.", usage=usage(10, 3))
        assert daemon.cron is not None and daemon.scheduler is not None
        await daemon.cron.add_job(
            CronRequest(
                kind="at", expr="+0.2s", message="Stretch.", deliver_to=encode_chat(chan.chat())
            )
        )
        await daemon.scheduler.sync()
        await chan.wait_sent(4)
        await daemon.scheduler.settle()
        after_cron = await scrape(daemon)
        assert moved(after_stop, after_cron) == {
            "perch_cron_runs_total{outcome=delivered}": 1,
            "perch_turns_total{channel=none,outcome=ok}": 1,
            "perch_turn_duration_seconds_count{channel=none}": 1,
            f"perch_model_calls_total{{model={MODEL},outcome=ok,provider=anthropic}}": 1,
            f"perch_model_tokens_total{{kind=input,model={MODEL},provider=anthropic}}": 10,
            f"perch_model_tokens_total{{kind=output,model={MODEL},provider=anthropic}}": 3,
            COST: pytest.approx(cost_usd(MODEL, Usage(10, 3))),
            "perch_channel_sends_total{channel=telegram,outcome=ok}": 1,
        }
    assert "Stretch." in last_user_text(fake.requests[-1])
    # No label anywhere names a user, a chat or a session.
    for (_name, labels), _value in after_cron.items():
        for key, label in labels:
            assert key not in ("user", "chat", "session", "chat_id", "session_key")
            assert "u1" not in label and "agent:" not in label


async def test_a_model_nobody_configured_is_counted_as_other(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, METRICS) as daemon:
        await chan.say("/model anthropic/claude-of-my-own-1234")
        await chan.say("hello")
        await chan.wait_sent(2)
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        samples = await scrape(daemon)
    assert fake.requests[-1]["model"] == "claude-of-my-own-1234"  # the session did switch
    assert (
        value(samples, "perch_model_calls_total", provider="anthropic", model="other", outcome="ok")
        == 1
    )
    assert not any("claude-of-my-own" in v for (_n, labels) in samples for _k, v in labels)


async def test_a_token_guards_the_scrape(tmp_path: Path, fake: FakeAnthropic) -> None:
    settings = {**METRICS, "metrics.token": TOKEN}
    async with running_daemon(tmp_path, fake, {}, settings) as daemon:
        url = endpoint(daemon)
        status, _, text = await get(url)
        assert status == 401 and "Bearer" in text
        status, _, _ = await get(url, {"Authorization": "Bearer not-the-token-at-all-no"})
        assert status == 401
        status, _, _ = await get(url, {"Authorization": f"Basic {TOKEN}"})
        assert status == 401
        samples = await scrape(daemon, TOKEN)
        assert ("process_resident_memory_bytes", frozenset()) in samples  # the process collector
        status, _, _ = await get(url.replace("/metrics", "/other"), {"Authorization": TOKEN})
        assert status == 404


async def test_two_daemons_in_one_process_keep_their_own_series(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    one, two = MemoryChannel("telegram"), MemoryChannel("telegram")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with (
        running_daemon(tmp_path / "a", fake, {"telegram": one}, METRICS) as first,
        running_daemon(tmp_path / "b", fake, {"telegram": two}, METRICS) as second,
    ):
        await one.say("hello")
        await one.wait_sent(1)
        await first.gateway.wait_idle()  # type: ignore[union-attr]
        ok = {"channel": "telegram", "outcome": "ok"}
        assert value(await scrape(first), "perch_turns_total", **ok) == 1
        assert value(await scrape(second), "perch_turns_total", **ok) == 0


async def test_metrics_are_off_unless_asked_for(tmp_path: Path, fake: FakeAnthropic) -> None:
    async with running_daemon(tmp_path, fake, {}, OPEN_DMS) as daemon:
        assert daemon.parts is not None and daemon.parts.metrics is None
        status = daemon.status()
    assert status["metrics"] == {"enabled": False} and status["tracing"] == {"enabled": False}
    assert "metrics_endpoint" not in status


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"metrics.listen": "0.0.0.0:9464"}, "set metrics.token"),
        ({"metrics.listen": "9464"}, "expected host:port"),
        ({"metrics.listen": "::1:9464"}, "in brackets"),
        ({"metrics.listen": "127.0.0.1:99999"}, "over 65535"),
        ({"metrics.token": "short"}, "at least 16 characters"),
        ({"tracing.endpoint": "collector:4318"}, "http(s):// URL"),
        ({"tracing.sample_ratio": 1.5}, "tracing.sample_ratio"),
    ],
)
def test_bad_metrics_and_tracing_settings_are_one_line_config_errors(
    tmp_path: Path, settings: dict[str, Any], problem: str
) -> None:
    overrides = {"metrics.enabled": True, "tracing.enabled": True, **settings}
    with pytest.raises(ConfigError) as caught:
        make_config(tmp_path, "http://127.0.0.1:1", overrides)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_listen_off_loopback_works_with_a_token(tmp_path: Path) -> None:
    overrides = {"metrics.enabled": True, "metrics.listen": "[::]:9464", "metrics.token": TOKEN}
    config = make_config(tmp_path, "http://127.0.0.1:1", overrides)
    assert config.metrics.listen == "[::]:9464" and config.metrics.token == TOKEN


async def test_a_taken_metrics_port_stops_the_start_with_one_line(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = {**METRICS, "metrics.listen": f"127.0.0.1:{port}"}
        with pytest.raises(StartupError) as caught:
            async with running_daemon(tmp_path, fake, {}, settings):
                pass
    assert str(caught.value).startswith(f"serving metrics on 127.0.0.1:{port} failed: ")
    assert "\n" not in str(caught.value)


async def test_every_message_the_daemon_sends_is_counted(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    """Not only replies: the owner's pairing notice and `perch send` reach the platform too,
    and each is one counted send."""
    chan = MemoryChannel("telegram")
    overrides = {
        **METRICS,
        "channels.telegram.dm_policy": "pairing",
        "channels.telegram.allow_from": ["owner1"],
    }
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        before = await scrape(daemon)
        await chan.say("let me in", chat_id="stranger")
        await chan.wait_sent(2)  # the stranger's code, and the notice in the owner's DM
        reply = await call(socket_path(daemon.config), "send", {"to": "owner", "text": "hi"})
        assert reply is not None and reply.code == 0, reply
        after = await scrape(daemon)
    assert sorted(s.chat.chat_id for s in chan.sent) == ["owner1", "owner1", "stranger"]
    assert moved(before, after) == {"perch_channel_sends_total{channel=telegram,outcome=ok}": 3}
