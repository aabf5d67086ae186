"""MCP servers of a real `perch run` process: `perch mcp list` and `perch status` read what
the daemon reports, and a stdio server never outlives the daemon, not even a `kill -9`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.bot.test_daemon_process import Perch
from tests.fakes.anthropic import FakeAnthropic
from tests.mcp_servers.running import stdio_entry
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def write_config(tmp_path: Path, base_url: str) -> Path:
    entry = stdio_entry(env={"PERCH_TEST_PIDFILE": str(tmp_path / "server.pid")})
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {
                    "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": base_url}
                },
                "heartbeat": {"every": 0},
                "gateway": {"shutdown_grace": "3s"},
                "mcp": {"servers": {"demo": entry}},
            }
        )
    )
    return path


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def server_up(tmp_path: Path) -> bool:
    try:
        status = json.loads((tmp_path / "data" / "status.json").read_text())
    except (OSError, ValueError):
        return False
    return bool(status.get("mcp", {}).get("demo", {}).get("state") == "up")


async def perch_cli(config: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.operator.cli",
        *args,
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        cwd=config.parent,
        env={**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_kill_9_of_the_daemon_leaves_no_mcp_server_behind(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = write_config(tmp_path, fake.base_url)
    perch = await Perch.start(config)
    await eventually(lambda: server_up(tmp_path), 60)
    pid = int((tmp_path / "server.pid").read_text())
    assert alive(pid)
    try:
        code, listing = await perch_cli(config, "mcp", "list")
        assert code == 0, listing
        assert f"From the running daemon (pid {perch.proc.pid})" in listing
        assert "demo (stdio" in listing and "up, 12 tool(s)" in listing
        assert "    demo__echo" in listing
        code, status = await perch_cli(config, "status")
        assert "  mcp demo (stdio" in status and "up, 12 tool(s)" in status

        perch.proc.kill()
        await perch.proc.wait()
        await eventually(lambda: not alive(pid), 30)
    finally:
        if perch.proc.returncode is None:
            perch.proc.kill()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_a_clean_stop_stops_the_mcp_server_too(tmp_path: Path, fake: FakeAnthropic) -> None:
    config = write_config(tmp_path, fake.base_url)
    perch = await Perch.start(config)
    await eventually(lambda: server_up(tmp_path), 60)
    pid = int((tmp_path / "server.pid").read_text())
    code, err = await perch.finish()  # EOF on the console stops the daemon
    assert code == 0, err
    assert not alive(pid)
    log = (tmp_path / "data" / "perch.log").read_text()  # the console had the terminal
    assert "mcp server demo is up" in log


def test_perch_mcp_list_connects_itself_when_no_daemon_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.operator.cli import main

    path = tmp_path / "config.yaml"
    servers = {
        "demo": stdio_entry(tools=["echo"]),
        "gone": {"command": [str(tmp_path / "missing")]},
        "off": stdio_entry(enabled=False),
    }
    path.write_text(yaml.safe_dump({"mcp": {"servers": servers}}))
    assert main(["mcp", "list", "--config", str(path)]) == 1
    out = capsys.readouterr().out
    assert "The daemon is not running; connecting to each server for a moment:" in out
    assert "demo (stdio" in out and "up, 1 tool(s)" in out and "    demo__echo" in out
    assert "gone (stdio" in out and "DOWN (program not found:" in out
    assert "off (stdio" in out and "disabled" in out


async def test_doctor_checks_each_enabled_mcp_server(tmp_path: Path) -> None:
    from bot.config.load import load_config
    from bot.operator.doctor_mcp import doctor_checks

    path = tmp_path / "config.yaml"
    servers = {
        "demo": stdio_entry(),
        "gone": {"command": [str(tmp_path / "missing")]},
        "off": stdio_entry(enabled=False),
    }
    path.write_text(yaml.safe_dump({"mcp": {"servers": servers}}))
    checks = {c.name: c for c in await doctor_checks(load_config(path, {}))}
    assert set(checks) == {"mcp demo", "mcp gone"}
    assert checks["mcp demo"].ok and checks["mcp demo"].detail == "up, 12 tool(s)"
    assert not checks["mcp gone"].ok
    assert "program not found" in checks["mcp gone"].line()
    assert "check mcp.servers.gone" in checks["mcp gone"].line()
