"""`perch doctor` lines about MCP: every enabled server must start and list its tools."""

from __future__ import annotations

from bot.config.schema import Config
from bot.operator.checks import Check
from bot.operator.mcp_probe import probe


async def doctor_checks(config: Config) -> list[Check]:
    """One `perch doctor` check per enabled server (it must start and list its tools)."""
    if not any(s.enabled for s in config.mcp.servers.values()):
        return []
    servers = await probe(config, timeout=20.0)
    checks: list[Check] = []
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
