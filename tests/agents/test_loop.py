"""The agent loop end to end, real tools, against both provider kinds: the real Anthropic SDK
-> fake Messages API, and the real openai SDK -> fake Chat Completions API (requests read
back in the Messages shape through `tests.model_backends.OpenAIView`)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agents.cancel import CancelToken
from agents.loop import (
    CANCELLED_RESULT,
    CUT_OFF_NOTE,
    MAX_PARALLEL_TOOLS,
    MAX_TOOL_CALLS,
    REFUSED_NOTE,
    AgentLoop,
    RunRequest,
    SteerInbox,
)
from agents.loop_events import Event, TextDelta, ToolFinished, ToolStarted
from agents.pricing import Price
from agents.providers.anthropic import AnthropicClient
from agents.providers.openai import OpenAIClient
from agents.tools.base import ToolContext, ToolRegistry, ToolResult
from agents.tools.files import file_tools
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai import FakeOpenAI
from tests.model_backends import KINDS, OpenAIView


class SlowTool:
    """Waits until released (or cancelled); records that it started."""

    name = "slow"
    description = "waits"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.started.set()
        await self.release.wait()
        return ToolResult("slow done")


class EchoTool:
    name = "echo"
    description = "echoes its input after an optional delay"
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"text": {"type": "string"}, "delay": {"type": "number"}},
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(float(args.get("delay", 0)))
        return ToolResult(str(args["text"]))


class BrokenTool:
    name = "broken"
    description = "always fails"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


class BigTool:
    name = "big"
    description = "returns a lot"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult("x" * 5000)


Fake = Any  # FakeAnthropic, or FakeOpenAI seen as OpenAIView
Client = AnthropicClient | OpenAIClient


@pytest.fixture(params=KINDS)
async def fake(request: pytest.FixtureRequest) -> AsyncIterator[Fake]:
    if request.param == "openai":
        async with FakeOpenAI() as server:
            yield OpenAIView(server)
    else:
        async with FakeAnthropic() as server:
            yield server


@pytest.fixture
async def client(fake: Fake) -> AsyncIterator[Client]:
    c: Client
    if isinstance(fake, OpenAIView):
        prices = {"claude-sonnet-5-5": Price(0.5, 1.5)}  # configured prices give a cost
        c = OpenAIClient(
            "test-key", fake.base_url, backoff_base=0.01, max_attempts=3, prices=prices
        )
    else:
        c = AnthropicClient("test-key", fake.base_url, backoff_base=0.01, max_attempts=3)
    yield c
    await c.aclose()


@pytest.fixture
async def afake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def aclient(afake: FakeAnthropic) -> AsyncIterator[AnthropicClient]:
    c = AnthropicClient("test-key", afake.base_url, backoff_base=0.01, max_attempts=3)
    yield c
    await c.aclose()


def request(tmp_path: Path, tools: ToolRegistry, text: str = "hi", **kw: Any) -> RunRequest:
    cancel = kw.pop("cancel", CancelToken())
    return RunRequest(
        session_key="agent:main:test:a:dm:u",
        system=[{"type": "text", "text": "be brief"}],
        history=kw.pop("history", []),
        user_content=[{"type": "text", "text": text}],
        tools=tools,
        context=ToolContext(workspace=tmp_path, session_key="k", cancel=cancel),
        cancel=cancel,
        **kw,
    )


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    return [b for b in last["content"] if b["type"] == "tool_result"]


async def test_multi_iteration_tool_turn_writes_and_reads_a_file(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(
        Reply.tool_use([("write_file", {"path": "notes.txt", "content": "buy milk"})]),
        Reply.tool_use([("read_file", {"path": "notes.txt"})], text="Checking."),
        Reply.text("Your note says: buy milk", chunk=5),
    )
    events: list[Event] = []

    async def emit(e: Event) -> None:
        events.append(e)

    loop = AgentLoop(client, "claude-sonnet-5-5")
    result = await loop.run(request(tmp_path, ToolRegistry(file_tools())), emit)

    assert result.status == "ok"
    assert result.text == "Your note says: buy milk"
    assert (tmp_path / "notes.txt").read_text() == "buy milk"
    assert len(fake.requests) == 3
    assert "buy milk" in tool_results(fake.requests[2])[0]["content"]
    roles = [m["role"] for m in result.new_messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [e.name for e in events if isinstance(e, ToolStarted)] == ["write_file", "read_file"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).endswith("buy milk")
    assert result.usage.input_tokens > 0 and result.usage.cost_usd > 0
    assert {t["name"] for t in fake.requests[0]["tools"]} >= {"read_file", "write_file"}


async def test_parallel_tool_calls_keep_results_in_call_order(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(
        Reply.tool_use(
            [
                ("echo", {"text": "first", "delay": 0.2}),
                ("echo", {"text": "second", "delay": 0.0}),
                ("echo", {"text": "third", "delay": 0.1}),
            ]
        ),
        Reply.text("done"),
    )
    finished: list[str] = []

    async def emit(e: Event) -> None:
        if isinstance(e, ToolFinished):
            finished.append(e.id)

    loop = AgentLoop(client, "m")
    result = await loop.run(request(tmp_path, ToolRegistry([EchoTool()])), emit)
    assert result.status == "ok"
    contents = [r["content"] for r in tool_results(fake.requests[1])]
    assert contents == ["first", "second", "third"]
    calls = [b["id"] for b in fake.requests[1]["messages"][-2]["content"]]
    # They ran concurrently: the fastest finished first although it was called second.
    assert finished[0] == calls[1]


class CountingTool:
    """Sleeps a moment and records how many of its calls ran at once."""

    name = "count"
    description = "counts concurrent calls"
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.running = self.most = self.calls = 0

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        self.calls += 1
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0.01)
        self.running -= 1
        return ToolResult("counted")


async def test_a_response_asking_for_hundreds_of_tool_calls_runs_a_bounded_number(
    afake: FakeAnthropic, aclient: AnthropicClient, tmp_path: Path
) -> None:
    # A hostile model asks for 200 calls at once: 8 run at a time, 64 in all, the rest are
    # answered with an error (every tool_use still gets its result, in call order).
    afake.queue(Reply.tool_use([("count", {})] * 200), Reply.text("done"))
    tool = CountingTool()
    result = await AgentLoop(aclient, "m").run(request(tmp_path, ToolRegistry([tool])))
    assert result.status == "ok"
    assert (tool.calls, tool.most) == (MAX_TOOL_CALLS, MAX_PARALLEL_TOOLS)
    results = tool_results(afake.requests[1])
    assert len(results) == 200
    assert [r["content"] for r in results[:MAX_TOOL_CALLS]] == ["counted"] * MAX_TOOL_CALLS
    assert all(r.get("is_error") and "not run" in r["content"] for r in results[MAX_TOOL_CALLS:])


async def test_a_reply_cut_at_the_output_limit_or_filtered_says_so(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(
        dataclasses.replace(Reply.text("The three reasons are: first,"), stop_reason="max_tokens"),
        dataclasses.replace(Reply.text(""), stop_reason="max_tokens"),  # all spent on thinking
    )
    loop = AgentLoop(client, "m")
    cut = await loop.run(request(tmp_path, ToolRegistry([])))
    assert cut.text == f"The three reasons are: first,\n\n{CUT_OFF_NOTE}"
    empty = await loop.run(request(tmp_path, ToolRegistry([])))
    assert empty.status == "ok" and empty.text == CUT_OFF_NOTE
    fake.queue(dataclasses.replace(Reply.text(""), stop_reason="refusal"))
    refused = await loop.run(request(tmp_path, ToolRegistry([])))
    assert refused.text == REFUSED_NOTE


async def test_a_tool_call_cut_at_the_output_limit_is_not_run(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    # The output limit ended the response inside its last call: that input may be half
    # written (a truncated command or path), so only the complete calls before it run.
    calls = [("count", {}), ("count", {})]
    cut = dataclasses.replace(Reply.tool_use(calls), stop_reason="max_tokens")
    fake.queue(cut, Reply.text("done"))
    tool = CountingTool()
    result = await AgentLoop(client, "m").run(request(tmp_path, ToolRegistry([tool])))
    assert result.status == "ok" and tool.calls == 1
    first, last = tool_results(fake.requests[1])
    assert first["content"] == "counted"
    assert last.get("is_error") or last["content"].startswith("Error")
    assert "output limit" in last["content"]


async def test_unknown_tool_and_tool_exception_come_back_as_errors(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(
        Reply.tool_use([("nope", {}), ("broken", {})]),
        Reply.text("sorry"),
    )
    loop = AgentLoop(client, "m")
    result = await loop.run(request(tmp_path, ToolRegistry([BrokenTool()])))
    assert result.status == "ok"
    unknown, broken = tool_results(fake.requests[1])
    assert unknown["is_error"] and "Unknown tool 'nope'" in unknown["content"]
    assert "broken" in unknown["content"]  # lists what exists
    assert broken["is_error"] and "disk on fire" in broken["content"]


async def test_oversized_tool_result_is_truncated_with_a_marker(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(Reply.tool_use([("big", {})]), Reply.text("ok"))
    loop = AgentLoop(client, "m", max_tool_result_chars=1000)
    await loop.run(request(tmp_path, ToolRegistry([BigTool()])))
    content = tool_results(fake.requests[1])[0]["content"]
    assert content.startswith("x" * 1000)
    assert "[OUTPUT TRUNCATED: showed 1000 of 5000 characters from big]" in content
    assert len(content) < 1100


async def test_cancel_mid_tool_answers_every_call_and_keeps_history_valid(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    slow = SlowTool()
    fake.queue(Reply.tool_use([("slow", {}), ("echo", {"text": "quick"})]))
    cancel = CancelToken()
    loop = AgentLoop(client, "m")
    task = asyncio.create_task(
        loop.run(request(tmp_path, ToolRegistry([slow, EchoTool()]), cancel=cancel))
    )
    await asyncio.wait_for(slow.started.wait(), 5)
    cancel.cancel()
    result = await asyncio.wait_for(task, 5)

    assert result.status == "cancelled"
    assert len(fake.requests) == 1  # no model call after the cancel
    last = result.new_messages[-1]
    assert last["role"] == "user"
    results = {b["tool_use_id"]: b for b in last["content"]}
    calls = [b for b in result.new_messages[-2]["content"] if b["type"] == "tool_use"]
    assert set(results) == {c["id"] for c in calls}
    slow_id = next(c["id"] for c in calls if c["name"] == "slow")
    assert results[slow_id]["content"] == CANCELLED_RESULT


async def test_stream_broken_after_text_is_not_retried(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(Reply.stream_error(partial_text="Half an ans"), Reply.text("never asked"))
    loop = AgentLoop(client, "m")
    result = await loop.run(request(tmp_path, ToolRegistry()), _ignore)
    assert result.status == "error"
    assert result.streamed
    assert len(fake.requests) == 1


async def test_cancel_while_waiting_for_the_model_ends_cleanly(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(Reply.hang())
    cancel = CancelToken()
    loop = AgentLoop(client, "m")
    task = asyncio.create_task(loop.run(request(tmp_path, ToolRegistry(), cancel=cancel)))
    await fake.wait_requests(1)
    cancel.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.status == "cancelled"
    assert [m["role"] for m in result.new_messages] == ["user"]


async def _ignore(event: Event) -> None:
    return None


async def test_iteration_cap_ends_the_turn_with_a_note(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.default = lambda body: Reply.tool_use([("echo", {"text": "again"})])
    loop = AgentLoop(client, "m", max_iterations=3)
    result = await loop.run(request(tmp_path, ToolRegistry([EchoTool()])))
    assert result.status == "max_iterations"
    assert len(fake.requests) == 3
    assert "stopped after 3 steps" in result.text
    assert result.new_messages[-1]["role"] == "assistant"


async def test_non_retryable_error_reaches_the_caller_as_a_clear_message(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(Reply.http_error(401, "authentication_error", "invalid x-api-key"))
    loop = AgentLoop(client, "m")
    result = await loop.run(request(tmp_path, ToolRegistry()))
    assert result.status == "error"
    assert "rejected the API key (401)" in result.error
    assert (
        "ANTHROPIC_API_KEY" if isinstance(client, AnthropicClient) else "api_key"
    ) in result.error
    assert len(fake.requests) == 1
    assert [m["role"] for m in result.new_messages] == ["user"]


async def test_retry_then_success_is_invisible_to_the_loop(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    fake.queue(Reply.http_error(529, "overloaded_error"), Reply.text("fine"))
    loop = AgentLoop(client, "m")
    result = await loop.run(request(tmp_path, ToolRegistry()))
    assert (result.status, result.text, len(fake.requests)) == ("ok", "fine", 2)


async def test_steering_messages_join_the_next_model_call(
    fake: Fake, client: Client, tmp_path: Path
) -> None:
    slow = SlowTool()
    fake.queue(Reply.tool_use([("slow", {})]), Reply.text("noted both"))
    steer = SteerInbox()
    loop = AgentLoop(client, "m")
    task = asyncio.create_task(loop.run(request(tmp_path, ToolRegistry([slow]), steer=steer)))
    await asyncio.wait_for(slow.started.wait(), 5)
    steer.put([{"type": "text", "text": "also: use metric units"}])
    slow.release.set()
    result = await asyncio.wait_for(task, 5)
    assert result.status == "ok"
    last = fake.requests[1]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0]["type"] == "tool_result"
    assert last["content"][-1]["text"] == "also: use metric units"


async def test_history_and_system_prompt_reach_the_model_with_cache_breakpoints(
    afake: FakeAnthropic, aclient: AnthropicClient, tmp_path: Path
) -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": "my name is Ada"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello Ada"}]},
    ]
    loop = AgentLoop(aclient, "m")
    await loop.run(request(tmp_path, ToolRegistry(), "who am I?", history=history))
    body = afake.requests[0]
    assert [m["content"][0]["text"] for m in body["messages"]] == [
        "my name is Ada",
        "Hello Ada",
        "who am I?",
    ]
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in history[-1]["content"][-1]  # the caller's data is untouched


async def test_a_history_ending_with_a_user_message_is_merged_not_doubled(
    afake: FakeAnthropic, aclient: AnthropicClient, tmp_path: Path
) -> None:
    history = [
        {"role": "user", "content": [{"type": "text", "text": "earlier, unanswered"}]},
    ]
    loop = AgentLoop(aclient, "m")
    result = await loop.run(request(tmp_path, ToolRegistry(), "now", history=history))
    sent = afake.requests[0]["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert [b["text"] for b in sent[0]["content"]] == ["earlier, unanswered", "now"]
    assert result.new_messages[0]["content"] == [{"type": "text", "text": "now"}]
