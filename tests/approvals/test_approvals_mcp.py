"""Approvals for MCP tools: a real stdio MCP server (tests/mcp_servers/) whose `wipe` tool is
marked `destructiveHint`; the shipped policy asks before it and runs the server's other tools
without asking; naming the tool in `agent.tools.policy` decides for it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.daemon import Daemon
from tests.approvals.support import audit, last_tool_result
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.mcp_servers.running import stdio_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)
WAIT = 60
OWNER = "u1"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def up(daemon: Daemon) -> None:
    await eventually(lambda: daemon.status()["mcp"]["demo"]["state"] == "up", WAIT)


async def test_a_destructive_mcp_tool_is_asked_about_and_the_rest_run(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.allow_from": [OWNER], "mcp.servers": {"demo": stdio_entry()}}
    async with running_daemon(tmp_path, model, {"telegram": chan}, overrides) as daemon:
        await up(daemon)
        model.queue(Reply.tool_use([("demo__echo", {"text": "hi"})]), Reply.text("ok"))
        await chan.say("echo hi", chat_id=OWNER)
        await model.wait_requests(2, timeout=WAIT)
        assert last_tool_result(model) == "echo: hi"  # not destructive: never asked

        model.queue(Reply.tool_use([("demo__wipe", {"name": "customers"})]))
        await chan.say("wipe customers", chat_id=OWNER)
        async with asyncio.timeout(WAIT):
            while not (ids := re.findall(r"Approval needed \((\w+)\)", "\n".join(chan.texts()))):
                await chan.wait_sent(len(chan.sent) + 1, WAIT)
        assert 'demo__wipe {"name": "customers"}' in chan.texts()[-1]
        await chan.say(f"/deny {ids[0]}", chat_id=OWNER)
        await model.wait_requests(4, timeout=WAIT)
        assert "Denied by the owner" in last_tool_result(model)
        [row] = await audit(daemon)
        assert (row.tool, row.status) == ("demo__wipe", "denied")


async def test_naming_a_destructive_tool_in_the_policy_decides_for_it(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {
        "channels.telegram.allow_from": [OWNER],
        "mcp.servers": {"demo": stdio_entry()},
        "agent.tools.policy": {"default": "allow", "demo__wipe": "allow", "demo__ec*": "deny"},
    }
    async with running_daemon(tmp_path, model, {"telegram": chan}, overrides) as daemon:
        await up(daemon)
        model.queue(
            Reply.tool_use([("demo__wipe", {"name": "x"}), ("demo__echo", {"text": "y"})]),
            Reply.text("ok"),
        )
        await chan.say("both", chat_id=OWNER)
        await model.wait_requests(2, timeout=WAIT)
        results = [
            b
            for b in model.requests[-1]["messages"][-1]["content"]
            if b.get("type") == "tool_result"
        ]
        assert results[0]["content"] == "wiped x"
        assert results[1]["is_error"] and "agent.tools.policy says deny" in results[1]["content"]
        assert await audit(daemon) == []
