"""MCP servers stay contained: they die with the daemon, cannot flood its memory or its log,
and by default cannot read Perch's secret files.

Real `perch run` processes and real stdio servers (tests/mcp_servers), no mocks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bot.test_daemon_process import Perch
from tests.fakes.anthropic import FakeAnthropic
from tests.mcp_servers.running import REPO, sandboxed_entry, stdio_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def pids_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (zombies count as gone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z" and b"bwrap" not in cmdline:
            found.append(int(entry.name))
    return found


def bwrap_works() -> bool:
    from agents.tools.sandbox import SandboxUnavailable, select_sandbox

    try:
        select_sandbox("bwrap")
    except SandboxUnavailable:
        return False
    return True


def server_entry(sandboxed: bool, marker: str, **env: str) -> dict[str, Any]:
    """A stdio test server that ignores EOF, with `marker` on its command line."""
    if not sandboxed:
        entry = stdio_entry(env=env)
    else:
        if not bwrap_works():
            pytest.skip("bwrap cannot run here, so there is no sandboxed server to test")
        boxed = sandboxed_entry()
        if boxed is None:
            pytest.skip("the sandboxed test server needs /usr/bin/python3")
        entry = {**boxed, "env": {**boxed["env"], **env}}
    entry["command"] = [*entry["command"], marker]
    return entry


def write_config(tmp_path: Path, base_url: str, servers: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {
                    "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": base_url}
                },
                "heartbeat": {"every": 0},
                "gateway": {"shutdown_grace": "3s"},
                "mcp": {"servers": servers},
            }
        )
    )
    return path


def state_of(tmp_path: Path, name: str) -> str:
    try:
        status = json.loads((tmp_path / "data" / "status.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(status.get("mcp", {}).get(name, {}).get("state", ""))


@pytest.mark.parametrize("sandboxed", [False, True], ids=["bare", "sandboxed"])
async def test_kill_9_of_the_daemon_takes_a_server_that_ignores_eof_with_it(
    tmp_path: Path, fake: FakeAnthropic, sandboxed: bool
) -> None:
    marker = f"perch-ghost-{uuid.uuid4().hex[:12]}"
    entry = server_entry(sandboxed, marker, PERCH_TEST_IGNORE_EOF="1")
    perch = await Perch.start(write_config(tmp_path, fake.base_url, {"ghost": entry}))
    try:
        await eventually(lambda: state_of(tmp_path, "ghost") == "up", 60)
        assert pids_with(marker), "the server is not running"
        perch.proc.kill()
        await perch.proc.wait()
        await eventually(lambda: not pids_with(marker), 30)
    finally:
        if perch.proc.returncode is None:
            perch.proc.kill()
        for pid in pids_with(marker):
            os.kill(pid, signal.SIGKILL)


_MEASURE = """
import asyncio, resource, sys
from agents.mcp.manager import McpManager
from agents.mcp.spec import ServerSpec
from agents.tools.base import ToolContext

async def main() -> None:
    spec = ServerSpec("big", command=(sys.executable, "-m", "tests.mcp_servers.stdio_server"),
                      cwd=None, timeout_s=120)
    manager = McpManager([spec])
    manager.start()
    await manager.wait_settled(60)
    [tool] = [t for t in manager.tools() if t.name == "big__big"]
    ctx = ToolContext(workspace=__import__("pathlib").Path("."), session_key="k")
    await tool.run({"size": 1000}, ctx)  # everything on the way loaded once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await tool.run({"size": int(sys.argv[1])}, ctx)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await manager.stop()
    print("GROWTH_KB", after - before, "CHARS", len(result.content), flush=True)
    print("TAIL", repr(result.content[-120:]))

asyncio.run(main())
"""


def test_a_30_mb_result_is_cut_while_it_is_read() -> None:
    """The daemon's peak memory grows by a small fraction of the answer, not a multiple."""
    size = 30_000_000
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(size)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    words = done.stdout.split()
    growth_mb = int(words[words.index("GROWTH_KB") + 1]) / 1024
    chars = int(words[words.index("CHARS") + 1])
    assert growth_mb < 60, f"the daemon grew by {growth_mb:.0f} MB for a 30 MB answer"
    assert chars < 2_001_000 and "cut while reading" in done.stdout


async def test_server_stderr_is_cleaned_rate_limited_and_logged_as_the_servers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agents.mcp.manager import McpManager
    from agents.mcp.spec import ServerSpec

    forged = "\x1b[31mERROR\x1b[0m perch.daemon: all secrets \x07leaked\x1b]0;title\x07\r\n"
    env = {"PERCH_TEST_STDERR": forged, "PERCH_TEST_STDERR_LINES": "500"}
    spec = ServerSpec(
        "noisy", command=(sys.executable, "-m", "tests.mcp_servers.stdio_server"), env=env
    )
    with caplog.at_level(logging.INFO):
        manager = McpManager([spec])
        manager.start()
        await manager.wait_settled(60)
        await eventually(
            lambda: any("not logged (too many)" in r.getMessage() for r in caplog.records), 30
        )
        await manager.stop()
    lines = [r for r in caplog.records if r.name == "mcp.server.noisy"]
    messages = [r.getMessage() for r in lines]
    assert messages[0] == "ERROR perch.daemon: all secrets leaked"
    assert all(not any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in m) for m in messages)
    assert len(messages) < 60  # a burst of 20 and a few a second, not 500
    dropped = [m for m in messages if "not logged (too many)" in m]
    assert dropped and "of mcp server noisy" in dropped[0]


async def test_a_stdio_server_is_sandboxed_by_default_and_sees_no_secret_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not bwrap_works():
        pytest.skip("bwrap cannot run here: servers then run bare (with a warning)")
    boxed = sandboxed_entry()
    if boxed is None:
        pytest.skip("the sandboxed test server needs /usr/bin/python3")
    from bot.config.load import load_config
    from bot.tools.mcp import build_manager

    secret = tmp_path / "anthropic_key"
    secret.write_text("sk-ant-file-secret-123456")
    default = {k: v for k, v in boxed.items() if k != "sandbox"}  # nothing said: the default
    bare = {**default, "sandbox": False}
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {"anthropic": {"api_key": f"${{file:{secret}}}"}},
                "mcp": {"servers": {"default": default, "bare": bare}},
            }
        )
    )
    with caplog.at_level(logging.WARNING):
        manager = await asyncio.to_thread(build_manager, load_config(path, {}))
    assert any(
        "mcp server bare runs unsandboxed (sandbox: false)" in r.getMessage()
        for r in caplog.records
    )
    manager.start()
    try:
        await manager.wait_settled(60)
        assert manager.status()["default"]["sandboxed"] is True
        tools = {t.name: t for t in manager.tools()}
        from agents.tools.base import ToolContext

        ctx = ToolContext(workspace=tmp_path, session_key="k")
        seen = [
            (await tools[f"{name}__exists"].run({"path": str(secret)}, ctx)).content
            for name in ("default", "bare")
        ]
    finally:
        await manager.stop()
    assert seen == ["no", "yes"]


_OUTSIDE_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("outside")


@server.tool()
def where() -> str:
    \"\"\"Say hello from a folder outside the workspace.\"\"\"
    return "hello from outside"


server.run("stdio")
"""


async def test_a_sandboxed_server_from_a_venv_and_a_folder_of_its_own_starts(
    tmp_path: Path,
) -> None:
    """`/srv/venv/bin/python /srv/mcp/server.py`, as server READMEs write it: the sandbox
    shows the interpreter's prefix and the script's folder read-only, so the server runs
    (before, only the workspace and the system folders were there, and it died at once)."""
    if not bwrap_works():
        pytest.skip("bwrap cannot run here: servers then run bare (with a warning)")
    from agents.tools.base import ToolContext
    from bot.config.load import load_config
    from bot.tools.mcp import build_manager

    folder = tmp_path / "srv" / "mcp"
    folder.mkdir(parents=True)
    script = folder / "server.py"
    script.write_text(_OUTSIDE_SERVER)
    work = tmp_path / "work"
    work.mkdir()
    path = tmp_path / "config.yaml"
    entry = {"command": sys.executable, "args": [str(script)], "cwd": str(work)}
    path.write_text(yaml.safe_dump({"mcp": {"servers": {"outside": entry}}}))
    manager = await asyncio.to_thread(build_manager, load_config(path, {}))
    manager.start()
    try:
        await manager.wait_settled(60)
        state = manager.status()["outside"]
        assert state["state"] == "up", state
        launch = manager.connections["outside"].spec.launch
        assert launch and "bwrap" in launch[0]  # sandboxed, as by default
        [tool] = [t for t in manager.tools() if t.name == "outside__where"]
        result = await tool.run({}, ToolContext(workspace=work, session_key="k"))
        assert "hello from outside" in result.content
    finally:
        await manager.stop()
