"""Sub-agents end to end: chat -> real daemon -> parent run -> `spawn` -> child runs -> fake model.

One fake model answers both parent and children: `Script` tells them apart by the minimal
prompt the children get, scripts the parent's replies in order, and lets each test decide
how children answer (by their task, or held on an event so they provably overlap).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agents.spawn_tool import SpawnTool
from agents.subagent_ports import SubagentStatus
from agents.tools.base import ToolContext, ToolError
from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from bot.store.rows import SessionRow
from tests.fakes.anthropic import FakeAnthropic, Reply, echo
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
PARENT_KEY = str(SessionKey.dm("main", "telegram", "bot", "u1"))

Body = dict[str, Any]


def is_child(body: Body) -> bool:
    return "focused worker agent" in body["system"][0]["text"]


def task_of(body: Body) -> str:
    """A child's task: the text of the first user message."""
    return str(body["messages"][0]["content"][-1]["text"])


def tool_names(body: Body) -> list[str]:
    return [t["name"] for t in body.get("tools") or []]


def tool_results(body: Body) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def spawn(task: str, label: str = "", **extra: Any) -> tuple[str, dict[str, Any]]:
    args: dict[str, Any] = {"task": task, **extra}
    if label:
        args["label"] = label
    return ("spawn", args)


class Script:
    """The fake model's answers: scripted for the parent, `child(body)` for children."""

    def __init__(self, fake: FakeAnthropic, *parent: Reply) -> None:
        self.parent = list(parent)
        self.child: Callable[[Body], Reply] = lambda body: Reply.text(f"{task_of(body)} -> found")
        self.fake = fake
        fake.default = self

    def __call__(self, body: Body) -> Reply:
        if is_child(body):
            return self.child(body)
        return self.parent.pop(0) if self.parent else echo(body)

    def parent_requests(self) -> list[Body]:
        return [b for b in self.fake.requests if not is_child(b)]

    def child_requests(self) -> list[Body]:
        return [b for b in self.fake.requests if is_child(b)]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def settle(daemon: Daemon) -> None:
    assert daemon.subagents is not None and daemon.gateway is not None
    assert await daemon.subagents.join(5)
    await asyncio.wait_for(daemon.gateway.wait_idle(), 5)


async def child_sessions(store: Store) -> list[SessionRow]:
    return [s for s in await store.list_sessions() if SessionKey.parse(s.key).kind == "sub"]


async def test_research_in_parallel_spawns_two_children_whose_answers_come_back_in_one_reply(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(
        fake,
        Reply.tool_use([spawn("research X", "X"), spawn("research Y", "Y")]),
        Reply.text("X and Y, summarised."),
    )
    gate = asyncio.Event()
    script.child = lambda body: Reply.text(f"{task_of(body)} -> found", hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("research X and Y in parallel")
        # Both children reach the model while neither can finish: they run concurrently.
        await fake.wait_requests(3)
        assert sorted(task_of(b) for b in script.child_requests()) == ["research X", "research Y"]
        gate.set()
        assert await chan.wait_sent(1) == ["X and Y, summarised."]
        await settle(daemon)
        store: Store = daemon.store  # type: ignore[assignment]
        children = await child_sessions(store)
        histories = [await store.messages(c.id) for c in children]
    final_request = script.parent_requests()[1]
    assert [r["content"] for r in tool_results(final_request)] == [
        "research X -> found",
        "research Y -> found",
    ]
    assert len(children) == 2
    for child in children:
        key = SessionKey.parse(child.key)
        assert key.depth == 1 and str(key.parent) == PARENT_KEY
        assert child.key.startswith("agent:main:sub:1:") and child.key.endswith(":" + PARENT_KEY)
    assert sorted(h[-1]["content"][0]["text"] for h in histories) == [
        "research X -> found",
        "research Y -> found",
    ]
    assert len(chan.sent) == 1


async def test_children_get_the_minimal_prompt_and_a_leaf_tool_set(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "SOUL.md").write_text("SOUL-MARKER")
    (tmp_path / "workspace" / "AGENTS.md").write_text("AGENTS-MARKER")
    script = Script(fake, Reply.tool_use([spawn("look around")]), Reply.text("ok"))
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.subagents.tools": {"deny": ["web_fetch"]}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("go")
        await chan.wait_sent(1)
        await settle(daemon)
    parent, child = script.parent_requests()[0], script.child_requests()[0]
    assert {"spawn", "message", "memory_append", "memory_search", "web_fetch"} <= set(
        tool_names(parent)
    )
    child_tools = set(tool_names(child))
    assert "read_file" in child_tools
    assert not child_tools & {"spawn", "message", "cron", "web_fetch"}
    assert not [n for n in child_tools if n.startswith("memory_")]
    system = child["system"][0]["text"]
    assert "AGENTS-MARKER" in system and "SOUL-MARKER" not in system
    assert "SOUL-MARKER" in parent["system"][0]["text"]


async def test_max_spawn_depth_two_allows_a_grandchild_but_no_deeper(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(fake, Reply.tool_use([spawn("level one")]), Reply.text("all done"))

    def child(body: Body) -> Reply:
        if task_of(body) == "level one":
            if not tool_results(body):
                return Reply.tool_use([spawn("level two")])
            return Reply.text("child got: " + tool_results(body)[0]["content"])
        return Reply.text("leaf answer")

    script.child = child
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.max_spawn_depth": 2}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("go deep")
        assert await chan.wait_sent(1) == ["all done"]
        await settle(daemon)
        store: Store = daemon.store  # type: ignore[assignment]
        depths = sorted(SessionKey.parse(s.key).depth for s in await child_sessions(store))
    by_task = {task_of(b): b for b in script.child_requests()}
    assert "spawn" in tool_names(by_task["level one"])
    assert "spawn" not in tool_names(by_task["level two"])
    assert "depth 2" in by_task["level two"]["system"][-1]["text"]  # the session's facts
    assert tool_results(script.parent_requests()[1])[0]["content"] == "child got: leaf answer"
    assert depths == [1, 2]


async def test_crafted_spawn_at_the_depth_limit_is_refused(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(fake, Reply.tool_use([spawn("try to go deeper")]), Reply.text("done"))

    def child(body: Body) -> Reply:
        if not tool_results(body):  # the leaf calls spawn although it was not offered
            return Reply.tool_use([spawn("deeper")])
        return Reply.text("could not: " + tool_results(body)[0]["content"])

    script.child = child
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("go")
        await chan.wait_sent(1)
        await settle(daemon)
        # The tool itself refuses too, whatever registry it is found in.
        assert daemon.subagents is not None
        leaf_key = str(SessionKey.sub(SessionKey.parse(PARENT_KEY), "abc"))
        ctx = ToolContext(workspace=tmp_path, session_key=leaf_key, depth=1, run_id="r1")
        requests_before = len(fake.requests)
        with (
            caplog.at_level(logging.WARNING, logger="agents.subagents"),
            pytest.raises(ToolError, match=r"agent\.max_spawn_depth \(1\)"),
        ):
            await SpawnTool(daemon.subagents).run({"task": "deeper"}, ctx)
        assert len(fake.requests) == requests_before
    [refusal] = tool_results(script.child_requests()[1])
    assert refusal["is_error"] is True and "Unknown tool 'spawn'" in refusal["content"]
    assert len(script.child_requests()) == 2  # no grandchild ever ran
    assert any(leaf_key in r.getMessage() for r in caplog.records)


async def test_the_sixth_child_of_one_run_is_refused(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [spawn(f"task {i}") for i in range(6)]
    script = Script(fake, Reply.tool_use(calls), Reply.text("done"))
    chan = MemoryChannel("telegram")
    with caplog.at_level(logging.INFO):
        async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
            await chan.say("do six things")
            await chan.wait_sent(1)
            await settle(daemon)
            store: Store = daemon.store  # type: ignore[assignment]
            children = await child_sessions(store)
    results = tool_results(script.parent_requests()[1])
    assert [r["content"] for r in results[:5]] == [f"task {i} -> found" for i in range(5)]
    assert results[5]["is_error"] is True
    assert "max_children_per_run=5" in results[5]["content"]
    assert len(children) == 5 and len(script.child_requests()) == 5
    [warning] = [r for r in caplog.records if "max_children_per_run" in r.getMessage()]
    assert warning.levelno == logging.WARNING and PARENT_KEY in warning.getMessage()


async def test_children_beyond_the_global_cap_are_queued_not_refused(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(fake, Reply.tool_use([spawn(f"job {i}") for i in range(3)]), Reply.text("ok"))
    gate = asyncio.Event()
    script.child = lambda body: Reply.text(f"{task_of(body)} -> found", hold=gate)
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "agent.subagents.max_concurrent": 2}
    with caplog.at_level(logging.INFO, logger="agents.subagents"):
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await chan.say("three jobs")
            await fake.wait_requests(3)  # the parent's call and two children
            assert daemon.subagents is not None
            assert daemon.subagents.status() == SubagentStatus(running=2, queued=1)
            assert len(script.child_requests()) == 2
            gate.set()
            await chan.wait_sent(1)
            await settle(daemon)
    assert fake.max_in_flight == 2
    results = tool_results(script.parent_requests()[1])
    assert [r["content"] for r in results] == [f"job {i} -> found" for i in range(3)]
    assert any("queued" in r.getMessage() and PARENT_KEY in r.getMessage() for r in caplog.records)


async def test_announce_mode_starts_a_parent_turn_with_the_childs_result(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(
        fake,
        Reply.tool_use([spawn("find the answer", "answer", wait=False)]),
        Reply.text("I'll report back."),
        Reply.text("The sub-agent says 42."),
    )
    gate = asyncio.Event()
    script.child = lambda body: Reply.text("the answer is 42", hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("find the answer in the background")
        assert await chan.wait_sent(1) == ["I'll report back."]
        [accepted] = tool_results(script.parent_requests()[1])
        gate.set()
        assert await chan.wait_sent(2) == ["I'll report back.", "The sub-agent says 42."]
        await settle(daemon)
        store: Store = daemon.store  # type: ignore[assignment]
        history = await store.messages((await store.session(PARENT_KEY)).id)
    status = json.loads(accepted["content"])
    assert status["status"] == "accepted" and status["spawnId"]
    announcement = script.parent_requests()[2]["messages"][-1]["content"][-1]["text"]
    assert announcement.startswith("[System message]")
    assert "the answer is 42" in announcement and status["spawnId"] in announcement
    assert history[-1]["content"][0]["text"] == "The sub-agent says 42."


async def test_results_finishing_together_are_announced_in_one_turn(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(
        fake,
        Reply.tool_use([spawn("task A", wait=False), spawn("task B", wait=False)]),
        Reply.text("Both started."),
        Reply.text("A and B are done."),
    )
    gate = asyncio.Event()
    script.child = lambda body: Reply.text(f"{task_of(body)} -> found", hold=gate)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("start A and B")
        await chan.wait_sent(1)
        gate.set()
        await chan.wait_sent(2)
        await settle(daemon)
    assert chan.texts() == ["Both started.", "A and B are done."]
    parents = script.parent_requests()
    assert len(parents) == 3
    announcement = parents[2]["messages"][-1]["content"][-1]["text"]
    assert "task A -> found" in announcement and "task B -> found" in announcement


async def test_a_child_that_runs_too_long_times_out_with_a_clear_result(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(
        fake, Reply.tool_use([spawn("slow work", "slow", timeout_s=0.3)]), Reply.text("gave up")
    )
    script.child = lambda body: Reply.hang()
    chan = MemoryChannel("telegram")
    with caplog.at_level(logging.WARNING, logger="agents.subagents"):
        async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
            await chan.say("do the slow thing")
            assert await chan.wait_sent(1) == ["gave up"]
            await settle(daemon)
            await fake.wait_idle()  # the hanging model call was abandoned
            store: Store = daemon.store  # type: ignore[assignment]
            [child] = await child_sessions(store)
            child_history = await store.messages(child.id)
    [result] = tool_results(script.parent_requests()[1])
    assert result["is_error"] is True
    assert result["content"] == 'sub-agent "slow" timed out after 0.3 s'
    assert [m["role"] for m in child_history] == ["user"]
    assert any(
        "timed out" in r.getMessage() and PARENT_KEY in r.getMessage() for r in caplog.records
    )


async def test_a_child_model_error_comes_back_as_the_tool_result(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(fake, Reply.tool_use([spawn("bad request", "bad")]), Reply.text("sorry"))
    script.child = lambda body: Reply.http_error(400, "invalid_request_error", "prompt too long")
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("try it")
        await chan.wait_sent(1)
        await settle(daemon)
    [result] = tool_results(script.parent_requests()[1])
    assert result["is_error"] is True
    assert result["content"].startswith('sub-agent "bad" failed: The model API rejected')
    assert "prompt too long" in result["content"]


async def test_stop_in_the_chat_cancels_the_running_children(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(fake, Reply.tool_use([spawn("long task A"), spawn("long task B")]))
    script.child = lambda body: Reply.hang()
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("work hard")
        await fake.wait_requests(3)
        await chan.say("/stop")
        assert await chan.wait_sent(1) == ["Stopped."]
        await settle(daemon)
        await fake.wait_idle()  # both children's model calls were dropped
        store: Store = daemon.store  # type: ignore[assignment]
        children = await child_sessions(store)
        child_histories = [await store.messages(c.id) for c in children]
        parent_history = await store.messages((await store.session(PARENT_KEY)).id)
    assert len(fake.requests) == 3 and chan.texts() == ["Stopped."]
    assert [[m["role"] for m in h] for h in child_histories] == [["user"], ["user"]]
    answers = [b for b in parent_history[-1]["content"] if b["type"] == "tool_result"]
    assert [a["content"] for a in answers] == ["cancelled by user", "cancelled by user"]


async def test_child_tokens_and_cost_are_added_to_the_parent_session(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    small = {"input_tokens": 10, "output_tokens": 5}
    script = Script(
        fake,
        Reply.tool_use([spawn("count things")], usage=small),
        Reply.text("counted", usage=small),
    )
    script.child = lambda body: Reply.text(
        "many", usage={"input_tokens": 1000, "output_tokens": 500}
    )
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("count")
        await chan.wait_sent(1)
        await settle(daemon)
        store: Store = daemon.store  # type: ignore[assignment]
        parent = await store.session(PARENT_KEY)
        [child] = await child_sessions(store)
        ledger = await store.usage_since(0)
    assert (child.input_tokens, child.output_tokens) == (1000, 500)
    assert (parent.input_tokens, parent.output_tokens) == (1020, 510)
    assert child.cost_usd > 0
    assert parent.cost_usd == pytest.approx(ledger.cost_usd)
    assert (ledger.input_tokens, ledger.output_tokens) == (1020, 510)  # nothing counted twice


async def test_a_cancelled_background_child_is_saved_but_not_announced(
    tmp_path: Path, fake: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    script = Script(
        fake, Reply.tool_use([spawn("watch forever", wait=False)]), Reply.text("Started.")
    )
    script.child = lambda body: Reply.hang()
    chan = MemoryChannel("telegram")
    with caplog.at_level(logging.INFO):
        async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
            await chan.say("watch it")
            assert await chan.wait_sent(1) == ["Started."]
            await fake.wait_requests(3)
            assert daemon.subagents is not None
            assert daemon.subagents.cancel_children_of(PARENT_KEY) == 1
            await settle(daemon)
            await fake.wait_idle()
            store: Store = daemon.store  # type: ignore[assignment]
            [child] = await child_sessions(store)
            assert [m["role"] for m in await store.messages(child.id)] == ["user"]
    messages = [r.getMessage() for r in caplog.records]
    assert any("nothing to announce" in m for m in messages)
    assert not any(m.startswith("announcing") or "not announced" in m for m in messages)
    assert chan.texts() == ["Started."]


async def test_stop_after_the_turn_ended_cancels_its_background_children(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    script = Script(
        fake,
        Reply.tool_use([spawn("watch the logs", "watcher", wait=False)]),
        Reply.text("Watching in the background."),
    )
    script.child = lambda body: Reply.hang()
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OPEN_DMS) as daemon:
        await chan.say("keep an eye on the logs")
        assert await chan.wait_sent(1) == ["Watching in the background."]
        await fake.wait_requests(3)  # the child is waiting on the model
        await chan.say("/stopall")
        assert (await chan.wait_sent(2))[-1] == "Stopped 1 run."
        await fake.wait_idle()  # the child's model call was dropped
        await chan.say("/stop")
        assert (await chan.wait_sent(3))[-1] == "Nothing to stop."
        await settle(daemon)
    assert len(fake.requests) == 3  # nothing was announced into the chat
