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


def unset_servers(config: Config) -> dict[str, dict[str, Any]]:
    """Servers whose command, env, url or headers kept an unset `${...}`: never started."""
    found: dict[str, dict[str, Any]] = {}
    for name, server in config.mcp.servers.items():
        key = f"mcp.servers.{name}"
        if server.enabled and config.is_unresolved(key):
            notes = [n for n in config.unresolved if n.startswith(key)]
            error = "not started: " + (notes[0] if notes else "a ${...} it uses is not set")
            transport = "stdio" if server.command else "http"
            where = server.command[0] if server.command else "(url not shown)"
            found[name] = {"state": "down", "transport": transport, "where": where,
                           "tools": [], "error": error}  # fmt: skip
    return found


async def probe(config: Config, timeout: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """Connect to every enabled server once and report what each offers (then stop them).

    A server that uses an unset `${...}` is reported as such and not started."""
    unset = unset_servers(config)
    manager = build_manager(config, exclude=unset)
    manager.start()
    try:
        await manager.wait_settled(timeout)
        status = manager.status()
    finally:
        await manager.stop()
    return {name: unset.get(name) or status[name] for name in config.mcp.servers}


def status_lines(servers: dict[str, dict[str, Any]], *, with_tools: bool) -> list[str]:
    lines: list[str] = []
    for name, s in servers.items():
        state = s.get("state", "?")
        head = f"{name} ({s.get('transport', '?')} {s.get('where', '')}): "
        if state == "up":
            tools = s.get("tools", [])
            lines.append(head + f"up, {len(tools)} tool(s)")
            if s.get("unknown_tools"):
                named = ", ".join(s["unknown_tools"])
                lines.append(f"    warning: tools: {named} names no tool of this server")
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
