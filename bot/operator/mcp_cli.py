"""`perch mcp list`, and the MCP lines of `perch status` and `perch doctor`.

`perch mcp list` shows each configured server, its state and its tools. With the daemon
running it reads what the daemon wrote to `status.json`; otherwise it connects to each
enabled server itself for a moment (at most `PROBE_TIMEOUT_S`) and stops them again.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from bot.config.load import load_config
from bot.config.paths import config_path, status_path
from bot.operator.mcp_probe import probe, status_lines
from bot.process.status import read_status


def register(sub: Any, add: Any) -> None:
    """Add `perch mcp` to the parser (called by `bot.operator.cli.build_parser`)."""
    mcp = add("mcp", cmd_mcp, "the configured MCP servers, their state and their tools")
    actions = mcp.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="each server, its state and its tools")
    listing.add_argument("--config", default=argparse.SUPPRESS, help="config file")


def cmd_mcp(args: argparse.Namespace) -> int:
    config = load_config(config_path(args.config), lenient=True)
    if not config.mcp.servers:
        print("No MCP servers configured (mcp.servers in the config file).")
        return 0
    daemon = read_status(status_path(config))
    if daemon is not None and "mcp" in daemon:
        print(f"From the running daemon (pid {daemon['pid']}):")
        servers = daemon["mcp"]
    else:
        print("The daemon is not running; connecting to each server for a moment:")
        servers = asyncio.run(probe(config))
    for line in status_lines(servers, with_tools=True):
        print(f"  {line}")
    return 0 if all(s.get("state") in ("up", "disabled") for s in servers.values()) else 1
