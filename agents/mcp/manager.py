"""The MCP servers as one tool source: start them, offer their tools, stop them.

`McpManager(specs)` is a `ToolProvider`: `tools()` lists a `McpTool` for every tool of every
server that is up, named `<server>__<tool>` (characters the model API refuses become `_`, the
name is cut at 64), and `generation` moves whenever that list changes, so registries rebuild
their cached schemas only then. `start()` launches one supervisor task per enabled server and
returns at once; `wait_settled()` waits until each server is up or has failed once (for
`perch mcp list`); `stop()` stops them all, each child process cleanly. `request_headers`
(optional) adds headers to each HTTP request of a call (the daemon's trace context).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

import mcp_types as types

from agents.mcp.connection import McpCallError, McpConnection, RequestHeaders, ServerSpec
from agents.mcp.results import map_result
from agents.tools.base import Tool, ToolContext, ToolError, ToolResult

log = logging.getLogger(__name__)

SEPARATOR = "__"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")
STOP_TIMEOUT_S = 10.0


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `<server>__<tool>`, valid for the Messages API."""
    return _INVALID.sub("_", f"{server}{SEPARATOR}{tool}")[:64]


class McpTool:
    """One tool of one MCP server, as a Perch `Tool`."""

    def __init__(self, connection: McpConnection, tool: types.Tool, name: str) -> None:
        self.name = name
        self.remote_name = tool.name
        self.description = (
            tool.description or tool.title or f"{tool.name} (MCP {connection.spec.name})"
        )
        schema = dict(tool.input_schema or {})
        schema.setdefault("type", "object")
        self.input_schema: dict[str, Any] = schema
        # The server's own word that the tool may destroy data: approvals ask before it.
        hints = tool.annotations
        self.destructive = hints is not None and hints.destructive_hint is True
        self._connection = connection

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            fraction = min(max(progress / total, 0.0), 1.0) if total else None
            await ctx.report(fraction, message or "")

        try:
            result = await self._connection.call(self.remote_name, args, progress)
        except McpCallError as exc:
            raise ToolError(str(exc)) from None
        return map_result(result)


class McpManager:
    """Supervises the configured servers and offers the tools of those that are up."""

    def __init__(
        self, specs: Iterable[ServerSpec], request_headers: RequestHeaders | None = None
    ) -> None:
        self._generation = 0
        self._tools: list[McpTool] = []
        self.connections = {s.name: McpConnection(s, self._changed, request_headers) for s in specs}
        self._tasks: list[asyncio.Task[None]] = []
        self._settled = asyncio.Event()
        self._check_settled()

    @property
    def generation(self) -> int:
        return self._generation

    def tools(self) -> Sequence[Tool]:
        return self._tools

    def start(self) -> None:
        """Connect every enabled server in the background (returns at once)."""
        for conn in self.connections.values():
            if conn.spec.enabled:
                task = asyncio.create_task(conn.run(), name=f"mcp:{conn.spec.name}")
                self._tasks.append(task)

    async def wait_settled(self, timeout: float) -> None:
        """Wait until each enabled server is up or failed at least once, or `timeout`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout)

    async def stop(self) -> None:
        for conn in self.connections.values():
            conn.stop()
        if not self._tasks:
            return
        _, pending = await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT_S)
        for task in pending:
            log.warning("mcp server task %s did not stop in time; cancelling it", task.get_name())
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=STOP_TIMEOUT_S)
        self._tasks.clear()

    def status(self) -> dict[str, dict[str, Any]]:
        return {name: conn.status() for name, conn in self.connections.items()}

    def _changed(self) -> None:
        tools: list[McpTool] = []
        seen: set[str] = set()
        for conn in self.connections.values():
            if conn.state != "up":
                continue
            for tool in conn.tools:
                name = tool_name(conn.spec.name, tool.name)
                if name in seen:
                    log.warning(
                        "mcp server %s: tool %r clashes with another as %r; skipped",
                        conn.spec.name,
                        tool.name,
                        name,
                    )
                    continue
                seen.add(name)
                tools.append(McpTool(conn, tool, name))
        self._tools = tools
        self._generation += 1
        self._check_settled()

    def _check_settled(self) -> None:
        if all(c.state != "starting" for c in self.connections.values()):
            self._settled.set()
