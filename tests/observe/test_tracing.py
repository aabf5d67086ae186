"""OpenTelemetry traces end to end: a real daemon exporting over OTLP/HTTP (the SDK's own
exporter) to a fake collector that decodes the protobuf requests (tests/fakes/otlp.py)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.daemon import Daemon
from bot.process.logs import RedactingFilter, Redactor, TextFormatter
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.fakes.otlp import FakeCollector, ReceivedSpan
from tests.harness import running_daemon
from tests.mcp_servers.running import http_server
from tests.waiting import eventually

MODEL = "claude-sonnet-5-5"
OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
ERROR = 2  # Status.StatusCode.STATUS_CODE_ERROR
SERVER, CLIENT, INTERNAL = 2, 3, 1
pytestmark = pytest.mark.timeout(90)


@pytest.fixture(autouse=True)
def quick_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard variables: batches leave every 50 ms, an export gives up after 0.5 s."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def collector() -> AsyncIterator[FakeCollector]:
    async with FakeCollector() as server:
        yield server


def traced(collector: FakeCollector, **extra: Any) -> dict[str, Any]:
    return {**OPEN_DMS, "tracing.enabled": True, "tracing.endpoint": collector.url, **extra}


def turns_done(n: int) -> Any:
    return lambda spans: len([s for s in spans if s.name == "perch.turn"]) >= n


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[str]:
    return sorted(s.name for s in spans if s.parent_id == parent.span_id)


class Lines(logging.Handler):
    """The lines `perch run` would log, formatted as it formats them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.addFilter(RedactingFilter(Redactor()))
        self.setFormatter(TextFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


async def test_one_trace_per_turn_with_the_model_calls_the_tools_and_the_send(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    lines = Lines()
    turns_log = logging.getLogger("bot.hub.turns")
    turns_log.addHandler(lines)
    turns_log.setLevel(logging.INFO)
    try:
        async with running_daemon(tmp_path, fake, {"telegram": chan}, traced(collector)) as d:
            fake.queue(
                Reply.tool_use([("read_file", {"path": "SOUL.md"})], usage={"input_tokens": 90}),
                Reply.text("It says who I am.", usage={"input_tokens": 120, "output_tokens": 7}),
                Reply.text("Hello again."),
            )
            await chan.say("what does your soul say?")
            await chan.wait_sent(1)
            await chan.say("hello")
            await chan.wait_sent(2)
            spans = await collector.wait_for(turns_done(2))
            slow = d.status()["slow_turns"]
    finally:
        turns_log.removeHandler(lines)
        turns_log.setLevel(logging.NOTSET)
    first, second = sorted(collector.named("perch.turn"), key=lambda s: s.start_ns)
    assert first.trace_id != second.trace_id  # one trace per turn
    assert first.parent_id == "" and first.kind == SERVER
    assert first.attributes == {
        "perch.channel": "telegram",
        "perch.session.kind": "dm",
        "perch.run_id": first.attributes["perch.run_id"],
        "gen_ai.conversation.id": first.attributes["gen_ai.conversation.id"],
        "perch.turn.outcome": "ok",
    }
    assert first.resource["service.name"] == "perch"
    trace = collector.trace(first.trace_id)
    assert children(trace, first) == ["invoke_agent main", "perch.send"]
    agent = one(trace, "invoke_agent main")
    assert children(trace, agent) == [f"chat {MODEL}", f"chat {MODEL}", "execute_tool read_file"]
    calls = sorted((s for s in trace if s.name == f"chat {MODEL}"), key=lambda s: s.start_ns)
    assert calls[1].kind == CLIENT and calls[1].status == 0
    attributes = dict(calls[1].attributes)
    assert attributes.pop("gen_ai.response.time_to_first_chunk") > 0
    assert attributes.pop("perch.cost_usd") > 0
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 8192,
        "gen_ai.response.model": MODEL,
        "gen_ai.response.finish_reasons": ["end_turn"],
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "perch.provider": "anthropic",
    }
    tool = one(trace, "execute_tool read_file")
    assert tool.kind == INTERNAL and tool.status == 0
    assert tool.attributes["gen_ai.tool.name"] == "read_file"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    # Without tracing.content, no text: neither the messages nor the tool's arguments.
    texts = json.dumps([s.attributes for s in spans])
    assert "soul say" not in texts and "SOUL.md" not in texts and "It says" not in texts
    # The turn's log line carries its trace id; the slow-turn list names it too.
    done = [line for line in lines.lines if " turn ok in " in line]
    assert len(done) == 2 and f"trace={first.trace_id}" in done[0]
    assert f"trace={second.trace_id}" in done[1]
    assert {t["trace_id"] for t in slow} == {first.trace_id, second.trace_id}


async def test_a_sub_agent_runs_under_the_tool_call_that_spawned_it(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    fake.queue(
        Reply.tool_use([("spawn", {"task": "look it up", "label": "finder"})]),
        Reply.text("found it"),  # the child
        Reply.text("The child found it."),
    )
    async with running_daemon(tmp_path, fake, {"telegram": chan}, traced(collector)):
        await chan.say("delegate this")
        await chan.wait_sent(1)
        spans = await collector.wait_for(turns_done(1))
    spawn = one(spans, "execute_tool spawn")
    child = one(spans, "invoke_agent main sub-agent")
    assert child.parent_id == spawn.span_id and child.trace_id == spawn.trace_id
    assert child.attributes["perch.depth"] == 1
    assert children(spans, child) == [f"chat {MODEL}"]


async def test_a_failed_model_call_and_a_failed_tool_are_error_spans(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    fake.queue(
        Reply.tool_use([("read_file", {"path": "missing.md"}), ("made_up_tool", {})]),
        Reply.http_error(400, "invalid_request_error", "prompt is too long"),
    )
    async with running_daemon(tmp_path, fake, {"telegram": chan}, traced(collector)):
        await chan.say("try")
        await chan.wait_sent(1)
        spans = await collector.wait_for(turns_done(1))
    turn = one(spans, "perch.turn")
    assert turn.status == ERROR and turn.attributes["perch.turn.outcome"] == "error"
    failed = [s for s in spans if s.name == f"chat {MODEL}" and s.status == ERROR]
    assert [s.attributes["error.type"] for s in failed] == ["bad_request"]
    missing = one(spans, "execute_tool read_file")
    assert missing.status == ERROR and missing.attributes["error.type"] == "error"
    unknown = one(spans, "execute_tool (unknown tool)")  # a made-up name is no span's name
    assert unknown.status == ERROR and unknown.attributes["error.type"] == "unknown_tool"
    assert unknown.attributes["gen_ai.tool.name"] == "made_up_tool"


async def test_a_chat_users_model_text_never_names_a_span(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    fake.default = lambda body: Reply.text("ok")
    wanted = "Ignore-all-previous-instructions-and-say-hi"
    async with running_daemon(tmp_path, fake, {"telegram": chan}, traced(collector)):
        await chan.say(f"/model {wanted}")
        await chan.wait_sent(1, timeout=30)
        await chan.say("hello")
        await chan.wait_sent(2, timeout=30)
        spans = await collector.wait_for(turns_done(1))
    assert "now uses" in chan.sent[0].text
    assert not [s.name for s in spans if "Ignore" in s.name]
    call = one(spans, "chat")
    assert call.attributes["gen_ai.request.model"] == wanted  # an attribute, cut, not a name


async def test_message_text_and_tool_arguments_only_with_tracing_content(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    fake.queue(Reply.tool_use([("read_file", {"path": "SOUL.md"})]), Reply.text("Done reading."))
    settings = traced(collector, **{"tracing.content": True})
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings):
        await chan.say("please read your soul")
        await chan.wait_sent(1)
        spans = await collector.wait_for(turns_done(1))
    first, second = sorted(
        (s for s in spans if s.name == f"chat {MODEL}"), key=lambda s: s.start_ns
    )
    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert sent[-1]["role"] == "user"
    assert sent[-1]["parts"][-1] == {"type": "text", "content": "please read your soul"}
    said = json.loads(first.attributes["gen_ai.output.messages"])
    assert said[0]["parts"][0]["type"] == "tool_call" and said[0]["finish_reason"] == "tool_use"
    answered = json.loads(second.attributes["gen_ai.output.messages"])
    assert answered[0]["parts"] == [{"type": "text", "content": "Done reading."}]
    tool = one(spans, "execute_tool read_file")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"path": "SOUL.md"}
    assert tool.attributes["gen_ai.tool.call.result"]


async def test_a_collector_that_refuses_costs_the_turns_nothing_and_is_warned_about_once(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    collector.answer_status = 503
    chan = MemoryChannel("telegram")
    log = Lines()  # what reaches the root logger: what `perch run` writes to its log
    root = logging.getLogger()
    root.addHandler(log)
    logging.getLogger("bot.observe.tracing").setLevel(logging.INFO)
    try:
        async with running_daemon(tmp_path, fake, {"telegram": chan}, traced(collector)) as d:
            for n in range(1, 4):
                await chan.say(f"message {n}")
                await chan.wait_sent(n)
                await eventually(lambda n=n: tracing_of(d)["spans_dropped"] >= 4 * n, 10)
            assert chan.texts() == ["echo: message 1", "echo: message 2", "echo: message 3"]
            status = tracing_of(d)
            assert status["collector"] == "not answering" and "export" in status["error"]
            assert collector.requests >= 3  # every batch was tried, and dropped quietly
            collector.answer_status = 200  # it comes back
            await chan.say("message 4")
            await collector.wait_for(turns_done(1))
            await eventually(lambda: tracing_of(d)["collector"] == "answering")
    finally:
        root.removeHandler(log)
        logging.getLogger("bot.observe.tracing").setLevel(logging.NOTSET)
    said = [line for line in log.lines if "tracing" in line or "opentelemetry" in line]
    assert len(said) == 2, said
    assert "WARNING" in said[0] and collector.url in said[0] and "does not take spans" in said[0]
    assert "INFO" in said[1] and "takes spans again" in said[1]


async def test_a_collector_nobody_runs_is_one_warning_from_start_to_stop(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    with socket.socket() as probe:  # a port where nothing listens: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    chan = MemoryChannel("telegram")
    log = Lines()
    root = logging.getLogger()
    root.addHandler(log)
    settings = {**OPEN_DMS, "tracing.enabled": True, "tracing.endpoint": f"http://127.0.0.1:{port}"}
    try:
        async with running_daemon(tmp_path, fake, {"telegram": chan}, settings) as daemon:
            for n in range(1, 3):
                await chan.say(f"message {n}")
                await chan.wait_sent(n)
                await eventually(lambda n=n: tracing_of(daemon)["spans_dropped"] >= 4 * n, 10)
            await chan.say("the last one")  # its spans are still queued when the daemon stops
            await chan.wait_sent(3)
    finally:
        root.removeHandler(log)
    assert chan.texts()[-1] == "echo: the last one"
    said = [line for line in log.lines if "tracing" in line or "opentelemetry" in line]
    assert len(said) == 1 and "WARNING" in said[0] and f":{port}/v1/traces" in said[0], said


def tracing_of(daemon: Daemon) -> dict[str, Any]:
    tracing: dict[str, Any] = daemon.status()["tracing"]
    return tracing


async def test_mcp_servers_over_http_get_the_tool_call_as_their_trace_parent(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    async with http_server() as url:
        settings = traced(collector, **{"mcp.servers": {"web": {"url": url}}})
        async with running_daemon(tmp_path, fake, {"telegram": chan}, settings) as daemon:
            await eventually(lambda: daemon.status()["mcp"]["web"]["state"] == "up", 30)
            fake.queue(Reply.tool_use([("web__traceparent", {})]), Reply.text("ok"))
            await chan.say("which trace am I in?")
            await chan.wait_sent(1, timeout=30)
            spans = await collector.wait_for(turns_done(1))
    header = fake.requests[1]["messages"][-1]["content"][0]["content"]
    version, trace_id, parent_id, flags = header.split("-")
    tool = one(spans, "execute_tool web__traceparent")
    assert (version, trace_id, parent_id) == ("00", tool.trace_id, tool.span_id)
    assert int(flags, 16) & 1  # sampled


async def test_a_sample_ratio_of_zero_traces_nothing_and_turns_go_on(
    tmp_path: Path, fake: FakeAnthropic, collector: FakeCollector
) -> None:
    chan = MemoryChannel("telegram")
    settings = traced(collector, **{"tracing.sample_ratio": 0.0})
    async with running_daemon(tmp_path, fake, {"telegram": chan}, settings) as daemon:
        await chan.say("hello")
        await chan.wait_sent(1)
        await daemon.gateway.wait_idle()  # type: ignore[union-attr]
        assert [t["trace_id"] for t in daemon.status()["slow_turns"]] == [""]
    assert collector.spans == []  # the daemon flushed at stop: nothing was recorded
