"""MCP servers as the operator sees them: a short-lived connection to each, and status lines.

`probe(config)` starts every enabled server for a moment (at most `PROBE_TIMEOUT_S`), asks
what it offers and stops it again; `status_lines` renders a status mapping (from a probe or
from the running daemon) for `perch mcp list`, `perch status` and `perch doctor`.
"""

from __future__ import annotations

import time
from typing import Any

from bot.config.schema import Config
from bot.tools.mcp import build_manager

PROBE_TIMEOUT_S = 30.0


async def probe(config: Config, timeout: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """Connect to every enabled server once and report what each offers (then stop them)."""
    manager = build_manager(config)
    manager.start()
    try:
        await manager.wait_settled(timeout)
        return manager.status()
    finally:
        await manager.stop()


def status_lines(servers: dict[str, dict[str, Any]], *, with_tools: bool) -> list[str]:
    lines: list[str] = []
    for name, s in servers.items():
        state = s.get("state", "?")
        head = f"{name} ({s.get('transport', '?')} {s.get('where', '')}): "
        if state == "up":
            tools = s.get("tools", [])
            lines.append(head + f"up, {len(tools)} tool(s)")
            if with_tools:
                lines.extend(f"    {name}__{tool}" for tool in tools)
        elif state == "down":
            retry = s.get("next_retry_at", 0.0) - time.time()
            when = f"; retrying in {retry:.0f} s" if retry > 0 else ""
            lines.append(head + f"DOWN ({s.get('error') or 'no reason given'}){when}")
        else:
            lines.append(head + state)
    return lines


def daemon_mcp_lines(daemon: dict[str, Any]) -> list[str]:
    """The `perch status` lines for the servers in a daemon's status.json."""
    return [f"  mcp {line}" for line in status_lines(daemon.get("mcp", {}), with_tools=False)]
