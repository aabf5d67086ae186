"""Start the test MCP servers: config entries for the stdio one, a process for the HTTP one."""

from __future__ import annotations

import asyncio
import sys
import sysconfig
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def stdio_entry(name: str = "demo", **extra: Any) -> dict[str, Any]:
    """A `mcp.servers.<name>` entry running tests/mcp_servers/stdio_server.py, unsandboxed
    (`sandbox=None` for the default, sandboxed where bwrap works)."""
    return {
        "command": [sys.executable, "-m", "tests.mcp_servers.stdio_server", name],
        "cwd": str(REPO),
        "sandbox": False,
        **extra,
    }


def sandboxed_entry(name: str = "boxed", **extra: Any) -> dict[str, Any] | None:
    """A `sandbox: true` entry for the stdio test server, run by the system's Python 3.11
    (the venv's interpreter lives outside what the sandbox shows) with the venv's packages;
    None when that Python is missing."""
    system = Path("/usr/bin/python3")
    if not system.exists():
        return None
    packages = sysconfig.get_paths()["purelib"]
    return {
        "command": [str(system), "-m", "tests.mcp_servers.stdio_server", name],
        "env": {"PYTHONPATH": f"{REPO}:{packages}"},
        "cwd": str(REPO),
        "sandbox": True,
        **extra,
    }


@asynccontextmanager
async def http_server(name: str = "web") -> AsyncIterator[str]:
    """Run tests/mcp_servers/http_server.py; yields its MCP endpoint URL on 127.0.0.1."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mcp_servers.http_server",
        name,
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line.startswith(b"PORT "):
            raise AssertionError(f"the HTTP MCP server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
