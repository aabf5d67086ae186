"""`perch mcp list`, and the MCP lines of `perch status` and `perch doctor`.

`perch mcp list` shows each configured server, its state and its tools. With the daemon
running it reads what the daemon wrote to `status.json`; otherwise it connects to each
enabled server itself for a moment (at most `PROBE_TIMEOUT_S`) and stops them again.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from bot.config.schema import Config

PROBE_TIMEOUT_S = 30.0


def register(sub: Any, add: Any) -> None:
    """Add `perch mcp` to the parser (called by `bot.operator.cli.build_parser`)."""
    mcp = add("mcp", cmd_mcp, "the configured MCP servers, their state and their tools")
    actions = mcp.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each server, its state and its tools")
    listing.add_argument("--config", default=argparse.SUPPRESS, help="config file")


async def probe(config: Config, timeout: float = PROBE_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """Connect to every enabled server once and report what each offers (then stop them)."""
    from bot.mcp_host import build_manager

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


def cmd_mcp(args: argparse.Namespace) -> int:
    from bot.operator.cli import _load, running_daemon

    config = _load(args)
    if not config.mcp.servers:
        print("No MCP servers configured (mcp.servers in the config file).")
        return 0
    daemon = running_daemon(config)
    if daemon is not None and "mcp" in daemon:
        print(f"From the running daemon (pid {daemon['pid']}):")
        servers = daemon["mcp"]
    else:
        print("The daemon is not running; connecting to each server for a moment:")
        servers = asyncio.run(probe(config))
    for line in status_lines(servers, with_tools=True):
        print(f"  {line}")
    return 0 if all(s.get("state") in ("up", "disabled") for s in servers.values()) else 1


async def doctor_checks(config: Config) -> list[Any]:
    """One `perch doctor` check per enabled server (it must start and list its tools)."""
    from bot.operator.doctor import Check

    if not any(s.enabled for s in config.mcp.servers.values()):
        return []
    servers = await probe(config, timeout=20.0)
    checks: list[Any] = []
    for name, s in servers.items():
        if s["state"] == "disabled":
            continue
        if s["state"] == "up":
            checks.append(Check(True, f"mcp {name}", f"up, {len(s['tools'])} tool(s)"))
        else:
            checks.append(
                Check(
                    False,
                    f"mcp {name}",
                    s["error"] or f"did not start ({s['state']})",
                    f"check mcp.servers.{name} (run the command or open the url by hand)",
                )
            )
    return checks
