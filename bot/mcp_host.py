"""The daemon's side of MCP: build the manager from `mcp.servers`, start and stop it.

`McpHost(config).start()` starts the servers in the background and returns the tool
providers for the belt (none when no server is configured, so the SDK is not even imported);
`status()` is the `mcp` part of `status.json` that `perch status` and `perch mcp list` read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.tools.base import ToolProvider
from bot.config import Config
from bot.mcp_config import server_specs

if TYPE_CHECKING:
    from agents.mcp.manager import McpManager


def build_manager(config: Config) -> McpManager:
    from agents.mcp.manager import McpManager

    base = config.source.parent if config.source is not None else None
    return McpManager(server_specs(config.mcp, base))


class McpHost:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.manager: McpManager | None = None

    def start(self) -> list[ToolProvider]:
        if not self.config.mcp.servers:
            return []
        self.manager = build_manager(self.config)
        self.manager.start()
        return [self.manager]

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()

    def status(self) -> dict[str, Any]:
        return {"mcp": self.manager.status()} if self.manager is not None else {}
