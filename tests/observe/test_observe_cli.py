"""`perch status --json` (with the daemon, after it, before any database) and the doctor's
metrics and tracing lines, against a fake OTLP collector."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.operator.cli import main
from bot.operator.doctor_observe import observe_checks
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.fakes.otlp import FakeCollector
from tests.harness import make_config, running_daemon

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture(autouse=True)
def quick_export(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")


@pytest.fixture
async def collector() -> AsyncIterator[FakeCollector]:
    async with FakeCollector() as server:
        yield server


async def status_json(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["status", "--json", "--config", str(config)]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


async def test_status_json_holds_the_metrics_and_the_trace_id_of_the_slowest_turns(
    tmp_path: Path, collector: FakeCollector, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    settings = {
        **OPEN_DMS,
        "metrics.enabled": True,
        "metrics.listen": "127.0.0.1:0",
        "tracing.enabled": True,
        "tracing.endpoint": collector.url,
    }
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, settings) as daemon,
    ):
        config = daemon.config.source
        assert config is not None
        await chan.say("hello")
        await chan.wait_sent(1)
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        await collector.wait_for(lambda spans: any(s.name == "perch.turn" for s in spans))
        [turn] = collector.named("perch.turn")
        live = await status_json(config, capsys)
        text_status = (
            await asyncio.to_thread(main, ["status", "--config", str(config)]),
            capsys.readouterr().out,
        )
    assert live["running"] is True and live["pid"] > 0
    assert live["metrics"]["series"]['perch_turns_total{channel="telegram",outcome="ok"}'] == 1
    assert live["metrics_endpoint"].startswith("http://127.0.0.1:")
    assert live["tracing"]["collector"] == "answering" and live["tracing"]["spans_dropped"] == 0
    [slow] = live["slow_turns"]
    assert slow["trace_id"] == turn.trace_id and slow["outcome"] == "ok"
    assert slow["channel"] == "telegram" and slow["session_kind"] == "dm" and slow["seconds"] > 0
    assert live["today"]["cost_usd"] > 0
    code, out = text_status
    assert code == 0 and f"trace {turn.trace_id}" in out and "metrics: http://127.0.0.1:" in out
    # The daemon is gone: the database still says what today cost.
    after = await status_json(config, capsys)
    assert after["running"] is False and after["today"] == live["today"]


async def test_status_json_before_any_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9")
    assert config.source is not None
    data = await status_json(config.source, capsys)
    assert data["running"] is False and "no database yet" in data["note"]


async def test_doctor_checks_the_collector_when_tracing_is_on(
    tmp_path: Path, collector: FakeCollector
) -> None:
    overrides = {
        "tracing.enabled": True,
        "tracing.endpoint": collector.url,
        "tracing.headers": {"x-api-key": "the-backend-key"},
    }
    config = make_config(tmp_path, "http://127.0.0.1:9", overrides)
    [ok] = await observe_checks(config)
    assert (
        ok.ok
        and ok.line() == f"OK    tracing: the collector at {collector.url}/v1/traces takes spans"
    )
    assert collector.requests == 1 and collector.headers["x-api-key"] == "the-backend-key"
    assert collector.headers["Content-Type"] == "application/x-protobuf"

    collector.answer_status = 401
    [refused] = await observe_checks(config)
    assert not refused.ok and "answered 401" in refused.line() and "tracing.headers" in refused.fix

    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    down = make_config(
        tmp_path,
        "http://127.0.0.1:9",
        {**overrides, "tracing.endpoint": f"http://127.0.0.1:{closed}"},
    )
    [failed] = await observe_checks(down)
    assert not failed.ok and failed.line().startswith(f"FAIL  tracing: http://127.0.0.1:{closed}")
    assert "start the collector" in failed.fix


async def test_doctor_says_where_metrics_are_and_skips_what_is_off(tmp_path: Path) -> None:
    assert await observe_checks(make_config(tmp_path, "http://127.0.0.1:9")) == []
    token = "a-scrape-token-of-32-characters!"
    overrides = {"metrics.enabled": True, "metrics.token": token}
    [line] = await observe_checks(make_config(tmp_path, "http://127.0.0.1:9", overrides))
    assert line.ok and "http://127.0.0.1:9464/metrics (bearer token required)" in line.detail
    assert token not in line.line()
