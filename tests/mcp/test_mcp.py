"""MCP servers in the tool belt: a real daemon, real MCP servers (tests/mcp_servers/, one over
stdio, one over Streamable HTTP on 127.0.0.1) and the fake Anthropic server driving the model."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agents.tools.sandbox import SandboxUnavailable, select_sandbox
from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from bot.store.roles import Store
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.mcp_servers.running import http_server, sandboxed_entry, stdio_entry
from tests.mcp_servers.tools import PIXEL
from tests.waiting import eventually

OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the last user message of a model request."""
    last = body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


def state(daemon: Daemon, server: str) -> str:
    return str(daemon.status()["mcp"][server]["state"])


async def up(daemon: Daemon, *servers: str) -> None:
    await eventually(lambda: all(state(daemon, s) == "up" for s in servers), 30)


async def test_a_turn_calls_tools_of_a_stdio_and_an_http_server(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    async with http_server() as url:
        servers = {"demo": stdio_entry(), "web": {"url": url}}
        chan = MemoryChannel("telegram")
        overrides = {**OPEN_DMS, "mcp.servers": servers}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await up(daemon, "demo", "web")
            fake.queue(
                Reply.tool_use(
                    [
                        ("demo__echo", {"text": "hi"}),
                        ("web__weather", {"city": "Oslo"}),
                        ("demo__picture", {}),
                    ]
                ),
                Reply.text("All done."),
            )
            await chan.say("use the tools")
            await chan.wait_sent(1, timeout=30)
            assert chan.texts() == ["All done."]
            offered = {t["name"]: t for t in fake.requests[0]["tools"]}
            assert offered["demo__echo"]["description"] == "Echo the text back."
            assert offered["demo__echo"]["input_schema"]["required"] == ["text"]
            assert "web__weather" in offered and "read_file" in offered
            echo, weather, picture = tool_results(fake.requests[1])
            assert echo["content"] == "echo: hi" and "is_error" not in echo
            assert '"celsius": 21' in weather["content"]
            caption, image = picture["content"]  # the model sees the picture itself
            assert caption["type"] == "text" and caption["text"].startswith("a red pixel\n[image")
            assert image == {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(PIXEL).decode(),
                },
            }


async def test_an_error_result_and_a_long_result_reach_the_model(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {
        **OPEN_DMS,
        "mcp.servers": {"demo": stdio_entry()},
        "agent.max_tool_result_chars": 1000,
    }
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await up(daemon, "demo")
        fake.queue(
            Reply.tool_use([("demo__fail", {"reason": "no key"}), ("demo__big", {"size": 5000})]),
            Reply.text("Noted."),
        )
        await chan.say("try")
        await chan.wait_sent(1, timeout=30)
        failed, big = tool_results(fake.requests[1])
        assert failed["is_error"] is True
        assert "refused: no key" in failed["content"]
        assert big["content"].startswith("x" * 1000)
        assert "[OUTPUT TRUNCATED: showed 1000 of 5000 characters from demo__big]" in big["content"]


async def test_a_server_that_crashes_mid_call_fails_the_call_and_comes_back(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "mcp.servers": {"demo": stdio_entry()}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await up(daemon, "demo")
        fake.queue(Reply.tool_use([("demo__crash", {})]), Reply.text("It broke."))
        await chan.say("crash it")
        await chan.wait_sent(1, timeout=30)
        (result,) = tool_results(fake.requests[1])
        assert result["is_error"] is True
        assert "disconnected during 'crash'" in result["content"]
        await eventually(lambda: state(daemon, "demo") == "down", 10)
        assert "demo__echo" not in daemon.tools
        await up(daemon, "demo")  # restarted with backoff
        assert daemon.status()["mcp"]["demo"]["attempts"] == 2
        fake.queue(Reply.tool_use([("demo__echo", {"text": "back"})]), Reply.text("ok"))
        await chan.say("again")
        await chan.wait_sent(2, timeout=30)
        assert tool_results(fake.requests[3])[0]["content"] == "echo: back"


async def test_an_http_server_dying_mid_call_fails_the_call_and_drops_its_tools(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    async with http_server() as url:
        chan = MemoryChannel("telegram")
        overrides = {**OPEN_DMS, "mcp.servers": {"web": {"url": url}}}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await up(daemon, "web")
            fake.queue(Reply.tool_use([("web__crash", {})]), Reply.text("It broke."))
            await chan.say("crash it")
            await chan.wait_sent(1, timeout=30)
            (result,) = tool_results(fake.requests[1])
            assert result["is_error"] is True
            assert "disconnected during 'crash'" in result["content"]
            await eventually(lambda: state(daemon, "web") == "down", 10)
            assert not [n for n in daemon.tools.names if n.startswith("web__")]


async def test_a_call_that_never_answers_times_out(tmp_path: Path, fake: FakeAnthropic) -> None:
    async with http_server() as url:
        chan = MemoryChannel("telegram")
        servers = {"web": {"url": url, "timeout_s": 0.5}}
        overrides = {**OPEN_DMS, "mcp.servers": servers}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await up(daemon, "web")
            fake.queue(Reply.tool_use([("web__hang", {})]), Reply.text("Too slow."))
            await chan.say("wait for it")
            await chan.wait_sent(1, timeout=30)
            (result,) = tool_results(fake.requests[1])
            assert result["is_error"] is True
            assert "did not answer 'hang' within 0.5 s" in result["content"]
            assert "mcp.servers.web.timeout_s" in result["content"]
            assert state(daemon, "web") == "up"


async def test_a_dead_server_at_start_is_reported_and_the_others_work(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = MemoryChannel("telegram")
    servers = {"demo": stdio_entry(), "gone": {"command": [str(tmp_path / "no-such-server")]}}
    overrides = {**OPEN_DMS, "mcp.servers": servers}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await up(daemon, "demo")
        await eventually(lambda: state(daemon, "gone") == "down", 10)
        gone = daemon.status()["mcp"]["gone"]
        assert "program not found" in gone["error"] and "no-such-server" in gone["error"]
        assert gone["next_retry_at"] > 0
        assert not [n for n in daemon.tools.names if n.startswith("gone__")]
        fake.queue(Reply.tool_use([("gone__anything", {})]), Reply.text("ok"))
        await chan.say("call the dead one")
        await chan.wait_sent(1, timeout=30)
        (result,) = tool_results(fake.requests[1])
        assert result["is_error"] is True and "Unknown tool 'gone__anything'" in result["content"]


async def test_stop_cancels_a_running_mcp_call(tmp_path: Path, fake: FakeAnthropic) -> None:
    marker = tmp_path / "hang-started"
    chan = MemoryChannel("telegram")
    overrides = {**OPEN_DMS, "mcp.servers": {"demo": stdio_entry()}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await up(daemon, "demo")
        fake.queue(Reply.tool_use([("demo__hang", {"marker": str(marker)})]))
        await chan.say("hang")
        await eventually(marker.exists, 20)
        await chan.say("/stop")
        await chan.wait_sent(1, timeout=30)
        assert chan.texts() == ["Stopped."]
        await asyncio.wait_for(daemon.gateway.wait_idle(), 10)  # type: ignore[union-attr]
        store: Store = daemon.store  # type: ignore[assignment]
        session = await store.session(str(SessionKey.dm("main", "telegram", "bot", "u1")))
        blocks = [b for m in await store.messages(session.id) for b in m["content"]]
        (cancelled,) = [b for b in blocks if b.get("type") == "tool_result"]
        assert cancelled["content"] == "cancelled by user"
        # The server is still there and answers the next call.
        assert state(daemon, "demo") == "up"
        fake.queue(Reply.tool_use([("demo__echo", {"text": "still"})]), Reply.text("fine"))
        await chan.say("again")
        await chan.wait_sent(2, timeout=30)
        assert tool_results(fake.requests[-1])[0]["content"] == "echo: still"


async def test_tools_announced_later_join_the_belt(tmp_path: Path, fake: FakeAnthropic) -> None:
    async with http_server() as url:
        chan = MemoryChannel("telegram")
        overrides = {**OPEN_DMS, "mcp.servers": {"web": {"url": url}}}
        async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
            await up(daemon, "web")
            assert "web__extra" not in daemon.tools
            fake.queue(Reply.tool_use([("web__grow", {})]), Reply.text("grown"))
            await chan.say("grow")
            await chan.wait_sent(1, timeout=30)
            await eventually(lambda: "web__extra" in daemon.tools, 10)
            fake.queue(Reply.tool_use([("web__extra", {})]), Reply.text("used it"))
            await chan.say("use the new one")
            await chan.wait_sent(2, timeout=30)
            assert "web__extra" in {t["name"] for t in fake.requests[2]["tools"]}
            assert tool_results(fake.requests[3])[0]["content"] == "extra here"


async def test_tool_policies_and_the_servers_allow_list_filter_mcp_tools(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    servers = {
        "demo": stdio_entry(tools=["echo", "weather"]),
        "other": stdio_entry("other", enabled=False),
    }
    overrides = {"mcp.servers": servers, "agent.subagents.tools.deny": ["demo__weather"]}
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        await up(daemon, "demo")
        mcp_tools = sorted(n for n in daemon.tools.names if "__" in n)
        assert mcp_tools == ["demo__echo", "demo__weather"]
        assert state(daemon, "other") == "disabled"
        child = daemon.subagents.tools_for(1)  # type: ignore[union-attr]
        assert "demo__echo" in child and "demo__weather" not in child


def sandbox_or_skip() -> dict[str, Any]:
    """The sandboxed entry, or a visible skip saying why it cannot run here."""
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap to run this")
    try:
        select_sandbox("bwrap")
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")
    entry = sandboxed_entry()
    probe = "import sys; print(sys.version_info[:2] == (3, 11))"
    if (
        entry is None
        or subprocess.run(
            [entry["command"][0], "-c", probe], capture_output=True, text=True, check=False
        ).stdout.strip()
        != "True"
    ):
        pytest.skip("the sandboxed test server needs /usr/bin/python3 at version 3.11")
    return entry


async def test_a_sandboxed_server_sees_only_its_own_directory(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    entry = sandbox_or_skip()
    chan = MemoryChannel("telegram")
    servers = {"boxed": entry, "demo": stdio_entry()}
    overrides = {**OPEN_DMS, "mcp.servers": servers}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await up(daemon, "boxed", "demo")
        assert daemon.status()["mcp"]["boxed"]["sandboxed"] is True
        data = str(tmp_path / "data")
        fake.queue(
            Reply.tool_use([("boxed__exists", {"path": data}), ("demo__exists", {"path": data})]),
            Reply.text("checked"),
        )
        await chan.say("look around")
        await chan.wait_sent(1, timeout=30)
        inside, outside = tool_results(fake.requests[1])
        assert (inside["content"], outside["content"]) == ("no", "yes")
