"""The daemon's side of MCP: build the manager from `mcp.servers`, start and stop it.

`McpHost(config)` is the tool provider the daemon puts on the belt. `start()` returns at once:
importing the MCP SDK (about a second) happens in a worker thread and the servers connect in
the background, so READY is not delayed by either; until then the host offers no tools and
reports every enabled server as `starting`. A server with `sandbox: true` is launched under
bubblewrap (`sandboxed`), or not at all. `status()` is the `mcp` part of `status.json`
that `perch status` and `perch mcp list` read. With no server configured the SDK is never
imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import shlex
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from agents.mcp.spec import ServerSpec
from agents.tools.base import Tool, ToolProvider
from bot.config.mcp import server_specs
from bot.config.schema import Config

if TYPE_CHECKING:
    from agents.mcp.connection import RequestHeaders
    from agents.mcp.manager import McpManager

log = logging.getLogger(__name__)


def build_manager(
    config: Config, exclude: Collection[str] = (), request_headers: RequestHeaders | None = None
) -> McpManager:
    """The manager for `mcp.servers` but `exclude` (blocking: it may probe the sandbox once);
    `request_headers` go with each HTTP request of a call (the trace context)."""
    from agents.mcp.manager import McpManager

    base = config.source.parent if config.source is not None else None
    specs = [s for s in server_specs(config.mcp, base) if s.name not in exclude]
    return McpManager(
        (sandboxed(config, s) if config.mcp.servers[s.name].sandbox else s for s in specs),
        request_headers,
    )


def sandboxed(config: Config, spec: ServerSpec) -> ServerSpec:
    """`spec` launched under bubblewrap, or refused (never run bare) when that cannot work.

    The server's working directory (its `cwd`, else the agent workspace) is its only writable
    place; it has its own PID namespace, no network unless `network: true`, the config
    directory hidden, and it dies with the daemon (`--die-with-parent`). The exec rlimits are
    not applied: they are sized for one command, not a long-lived server.
    """
    from agents.tools.sandbox import Limits, SandboxUnavailable, select_sandbox

    network = config.mcp.servers[spec.name].network
    hide = [config.source.parent] if config.source is not None else []
    try:
        sandbox = select_sandbox("bwrap", network=network, limits=Limits(0, 0, 0, 0), hide=hide)
    except SandboxUnavailable as exc:
        reason = str(exc).replace("exec.sandbox is bwrap", "sandbox: true")
        return replace(spec, refused=f"mcp.servers.{spec.name}.sandbox: {reason}")
    workdir = spec.cwd or config.workspace
    launch = tuple(sandbox.argv(workdir, shlex.join(spec.command)))
    return replace(spec, launch=launch, cwd=workdir)


class McpHost:
    """A `ToolProvider` over the MCP manager, which exists once the SDK is loaded;
    `request_headers` go with each HTTP request of a call (the trace context)."""

    def __init__(self, config: Config, request_headers: RequestHeaders | None = None) -> None:
        self.config = config
        self.request_headers = request_headers
        self.manager: McpManager | None = None
        self._loading: asyncio.Task[None] | None = None

    @property
    def generation(self) -> int:
        return 0 if self.manager is None else 1 + self.manager.generation

    def tools(self) -> Sequence[Tool]:
        return () if self.manager is None else self.manager.tools()

    def providers(self) -> list[ToolProvider]:
        """What to put on the tool belt: this host, when any server is configured."""
        return [self] if self.config.mcp.servers else []

    def start(self) -> None:
        """Start the servers in the background (their tools appear as each comes up)."""
        if self.config.mcp.servers:
            self._loading = asyncio.create_task(self._load(), name="mcp:load")

    async def _load(self) -> None:
        try:
            await asyncio.to_thread(importlib.import_module, "agents.mcp.manager")
        except ImportError as exc:
            log.error("mcp: the MCP SDK cannot be imported (%s); reinstall Perch", exc)
            return
        manager = await asyncio.to_thread(build_manager, self.config, (), self.request_headers)
        manager.start()
        self.manager = manager

    async def stop(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loading
        if self.manager is not None:
            await self.manager.stop()

    def status(self) -> dict[str, Any]:
        if self.manager is not None:
            return {"mcp": self.manager.status()}
        if not self.config.mcp.servers:
            return {}
        return {
            "mcp": {
                name: {"state": "starting" if s.enabled else "disabled", "tools": [], "error": ""}
                for name, s in self.config.mcp.servers.items()
            }
        }
