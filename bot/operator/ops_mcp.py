"""`perch mcp list` as a control operation: the running daemon's MCP servers, asked live.

`op_mcp_list` answers over the control socket from the daemon's own state at that moment (so
`perch mcp list` and `perch status` never disagree); without a daemon, `probe_reply` connects
to each enabled server for a moment instead. Both render with `servers_reply`.
"""

from __future__ import annotations

from typing import Any

from bot.config.schema import Config
from bot.operator.mcp_probe import probe, status_lines
from bot.operator.reply import OpContext, Reply


def servers_reply(heading: str, servers: dict[str, dict[str, Any]]) -> Reply:
    lines = [heading, *(f"  {line}" for line in status_lines(servers, with_tools=True))]
    ok = all(s.get("state") in ("up", "disabled") for s in servers.values())
    return Reply(0 if ok else 1, "\n".join(lines) + "\n")


async def op_mcp_list(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is None:
        return await probe_reply(ctx.config)
    status = ctx.live.status()
    servers = status.get("mcp", {})
    return servers_reply(f"From the running daemon (pid {status.get('pid')}):", servers)


async def probe_reply(config: Config) -> Reply:
    servers = await probe(config)
    return servers_reply(
        "The daemon is not running; connecting to each server for a moment:", servers
    )
