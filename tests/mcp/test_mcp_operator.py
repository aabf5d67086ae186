"""MCP as server READMEs write it and as the operator sees it: `command` + `args`, `perch mcp
add --json`, allow-list typos warned, retries kept out of sight, progress shown while a tool
runs, and `perch mcp list` asking the running daemon live."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.mcp.manager import McpManager
from agents.mcp.spec import ServerSpec
from bot.config.load import load_config
from bot.config.mcp import server_specs
from bot.operator.cli import main
from channels.base import ChatRef, ReplyStream
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.mcp_servers.running import REPO, stdio_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(90)
OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def test_command_as_a_string_with_args_is_one_argv(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "mcp:\n  servers:\n    files:\n      command: npx\n"
        "      args: [-y, '@modelcontextprotocol/server-filesystem', /srv/notes]\n"
    )
    (spec,) = server_specs(load_config(path, {}).mcp)
    assert spec.command == ("npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/notes")


def test_mcp_add_json_writes_the_servers_structurally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    assert main(["init", "--config", str(config)]) == 0
    block = (
        '{"mcpServers": {"files": {"command": "npx", "args": ["-y", "@mcp/fs", "/srv"], '
        '"env": {"TOKEN": "${FS_TOKEN:-}"}}, "off": {"type": "http", "url": "https://e.com/mcp", '
        '"headers": {"Authorization": "Bearer x"}, "disabled": true}}}'
    )
    assert main(["mcp", "add", "--config", str(config), "--json", block]) == 0
    assert "Added files, off" in capsys.readouterr().out
    text = config.read_text()
    assert "# MCP servers whose tools join" in text  # the comments are kept
    servers = load_config(config, {"ANTHROPIC_API_KEY": "k"}).mcp.servers
    assert servers["files"].command == ["npx", "-y", "@mcp/fs", "/srv"]
    assert servers["off"].url == "https://e.com/mcp" and not servers["off"].enabled
    assert (tmp_path / "config.yaml.bak.1").exists()
    assert main(["mcp", "add", "--config", str(config), "--json", block]) == 1  # names taken
    assert "pass --replace" in capsys.readouterr().err
    sse = '{"mcpServers": {"old": {"type": "sse", "url": "https://e.com/sse"}}}'
    assert main(["mcp", "add", "--config", str(config), "--json", sse]) == 2
    assert "Streamable HTTP" in capsys.readouterr().err
    one = tmp_path / "one.json"
    one.write_text('{"command": "uvx", "args": ["mcp-server-git"]}')
    assert main(["mcp", "add", "git", "--config", str(config), "--json", f"@{one}"]) == 0
    assert yaml.safe_load(config.read_text())["mcp"]["servers"]["git"]["command"] == "uvx"


async def test_an_allow_list_entry_naming_no_tool_is_warned_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    entry = stdio_entry()
    spec = ServerSpec(
        "demo", tuple(entry["command"]), cwd=Path(entry["cwd"]), allow=("echo", "ecko")
    )
    manager = McpManager([spec])
    with caplog.at_level(logging.WARNING):
        manager.start()
        await manager.wait_settled(30)
        await manager.stop()
    assert "tools: ecko names no tool it offers" in caplog.text
    assert manager.status()["demo"]["unknown_tools"] == ["ecko"]


async def test_a_failing_server_warns_once_then_retries_quietly_with_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = ServerSpec("gone", (sys.executable, "-c", "raise SystemExit(1)"), first_backoff_s=0.05)
    manager = McpManager([spec])
    with caplog.at_level(logging.INFO, logger="agents.mcp.connection"):
        manager.start()
        connection = manager.connections["gone"]
        await eventually(lambda: connection.attempts >= 4, 30)
        await manager.stop()
    downs = [r for r in caplog.records if "is down" in r.getMessage()]
    assert [r.levelno for r in downs[:3]] == [logging.WARNING, logging.INFO, logging.INFO]
    waits = [float(r.getMessage().rsplit("retrying in ", 1)[1].split()[0]) for r in downs]
    assert waits == sorted(waits)  # 1, 2, 4 ... x the first backoff, capped


def test_mcp_list_without_a_daemon_prints_no_log_lines(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "mcp:\n  servers:\n"
        f"    gone: {{command: ['{sys.executable}', '-c', 'raise SystemExit(1)']}}\n"
        "channels: {console: {enabled: false}}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "mcp", "list", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 1 and "gone (stdio" in proc.stdout and "DOWN" in proc.stdout
    assert proc.stderr == ""  # no "down; retrying" lines after the table


class ProgressChannel(MemoryChannel):
    """A chat whose reply stream shows tools, as the console does."""

    def __init__(self) -> None:
        super().__init__("telegram")
        self.shown: list[tuple[str, float | None]] = []

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        stream = super().reply_stream(chat)
        shown = self.shown

        class Showing:
            interval = stream.interval
            update, finish, abort = stream.update, stream.finish, stream.abort

            async def tool(self, name: str, fraction: float | None = None) -> None:
                shown.append((name, fraction))

        return Showing()


async def test_progress_notifications_reach_the_indicator(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    chan = ProgressChannel()
    overrides: dict[str, Any] = {**OPEN_DMS, "mcp.servers": {"demo": stdio_entry()}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await eventually(lambda: daemon.status()["mcp"]["demo"]["state"] == "up", 30)
        fake.queue(Reply.tool_use([("demo__steps", {})]), Reply.text("Done."))
        await chan.say("run the steps")
        await chan.wait_sent(1, timeout=30)
    assert chan.shown[0] == ("demo__steps", None)
    assert ("demo__steps", 0.4) in chan.shown and ("demo__steps", 1.0) in chan.shown


async def test_mcp_list_asks_the_running_daemon_and_agrees_with_status(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides: dict[str, Any] = {**OPEN_DMS, "mcp.servers": {"demo": stdio_entry()}}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides):
        config = str(tmp_path / "config.yaml")
        while True:  # the first moment perch status shows the server up ...
            assert await asyncio.to_thread(main, ["status", "--config", config]) == 0
            if "mcp demo (stdio" in (out := capsys.readouterr().out) and "up," in out:
                break
            await asyncio.sleep(0.05)
        # ... perch mcp list says the same (it used to read a status file up to 5 s old)
        assert await asyncio.to_thread(main, ["mcp", "list", "--config", config]) == 0
        listed = capsys.readouterr().out
    assert listed.startswith("From the running daemon (pid")
    assert "demo (stdio" in listed and "up, " in listed and "demo__echo" in listed
