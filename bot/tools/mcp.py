"""The daemon's side of MCP: build the manager from `mcp.servers`, start and stop it.

`McpHost(config)` is the tool provider the daemon puts on the belt. `start()` returns at once:
importing the MCP SDK (about a second) happens in a worker thread and the servers connect in
the background, so READY is not delayed by either; until then the host offers no tools and
reports every enabled server as `starting`. A stdio server is launched under bubblewrap
(`sandboxed`) by default when bwrap works here, so it cannot read Perch's secret files;
`sandbox: true` insists (not started at all without bwrap), `sandbox: false` opts out, and
either way a server that runs bare is warned about at start. `status()` is the `mcp` part of
`status.json` that `perch status` and `perch mcp list` read. With no server configured the
SDK is never imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import os
import shlex
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.mcp.spec import ServerSpec
from agents.tools.base import Tool, ToolProvider
from agents.tools.sandbox import (
    SYSTEM_DIRS,
    Limits,
    Sandbox,
    SandboxUnavailable,
    select_sandbox,
)
from bot.config.layout import sandbox_hidden
from bot.config.mcp import server_specs
from bot.config.schema import Config

if TYPE_CHECKING:
    from agents.mcp.connection import RequestHeaders
    from agents.mcp.manager import McpManager

log = logging.getLogger(__name__)
SERVER_HOME = Path("/home/mcp")


def build_manager(
    config: Config, exclude: Collection[str] = (), request_headers: RequestHeaders | None = None
) -> McpManager:
    """The manager for `mcp.servers` but `exclude` (blocking: it may probe the sandbox once);
    `request_headers` go with each HTTP request of a call (the trace context)."""
    from agents.mcp.manager import McpManager

    base = config.source.parent if config.source is not None else None
    specs = [s for s in server_specs(config.mcp, base) if s.name not in exclude]
    boxes: dict[bool, Sandbox | SandboxUnavailable] = {}
    return McpManager((launch(config, spec, boxes) for spec in specs), request_headers)


def launch(
    config: Config, spec: ServerSpec, boxes: dict[bool, Sandbox | SandboxUnavailable]
) -> ServerSpec:
    """How `spec` is started: sandboxed unless its config opts out or bwrap cannot work."""
    server = config.mcp.servers[spec.name]
    if not spec.command or not spec.enabled:
        return spec
    if server.sandbox is False:
        log.warning(
            "mcp server %s runs unsandboxed (sandbox: false): it can read every file Perch's "
            "user can, the secret files included",
            spec.name,
        )
        return spec
    if server.network not in boxes:
        try:
            boxes[server.network] = select_sandbox(
                "bwrap", network=server.network, limits=Limits(0, 0, 0, 0, 0), cgroups=False
            )
        except SandboxUnavailable as exc:
            boxes[server.network] = exc
    found = boxes[server.network]
    if isinstance(found, SandboxUnavailable):
        reason = str(found).replace("exec.sandbox is bwrap", "the sandbox")
        if server.sandbox:
            return replace(spec, refused=f"mcp.servers.{spec.name}.sandbox: {reason}")
        log.warning(
            "mcp server %s runs unsandboxed: %s (set sandbox: false to accept that without "
            "this warning)",
            spec.name,
            reason,
        )
        return spec
    return sandboxed(config, spec, found)


def sandboxed(config: Config, spec: ServerSpec, sandbox: Sandbox) -> ServerSpec:
    """`spec` launched under bubblewrap, or refused when its folder is one Perch protects.

    The folders of the program and script its command names are shown read-only
    (`program_folders`). The server's working directory (its `cwd`, else the agent workspace) and a home of its own
    (`<state directory>/mcp/<name>`, shown inside as `/home/mcp`, its `HOME`: npx and uvx keep
    their caches there) are its only writable places; it has its own PID and IPC namespaces, the network unless `network:
    false`, every protected path masked (`bot.config.layout.sandbox_hidden`: the config
    folder, the state directory and its socket, the secret files, the credentials directory),
    and it dies with the daemon (`--die-with-parent`). The exec rlimits are not applied: they
    are sized for one command, not a long-lived server.
    """
    workdir = Path(os.path.realpath(spec.cwd or config.workspace))
    hidden = sandbox_hidden(config)
    if any(workdir == Path(os.path.realpath(p)) for p in hidden):
        return replace(
            spec,
            refused=f"mcp.servers.{spec.name}.cwd: {workdir} is a folder Perch keeps from its "
            "tools (the config folder or the state directory); give the server a folder of "
            "its own",
        )
    home = config.db_path.parent / "mcp" / spec.name
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    box = dataclasses.replace(sandbox, hide=tuple(hidden), extra_rw=((home, SERVER_HOME),))
    shown = program_folders(spec.command)
    argv = tuple(box.argv(workdir, shlex.join(spec.command), [(p, str(p)) for p in shown]))
    env = {"HOME": str(SERVER_HOME), **spec.env}
    return replace(spec, launch=argv, cwd=workdir, env=env)


def program_folders(command: Sequence[str]) -> list[Path]:
    """The folders a server's command needs to see (read-only) to run: for every existing
    absolute path it names (`/srv/venv/bin/python /srv/mcp/server.js`), as written and with
    its links resolved, the folder holding it, or for a program in a `bin` folder the prefix
    above it (a virtualenv or an install: `/srv/venv`, its `lib` beside its `bin`). Folders
    under the system ones are there already; what Perch protects inside the others stays
    masked."""
    folders: list[Path] = []
    for word in command:
        if not os.path.isabs(word) or not os.path.exists(word):
            continue
        for path in (Path(os.path.normpath(word)), Path(os.path.realpath(word))):
            folder = path if path.is_dir() else path.parent
            if folder.name == "bin":
                folder = folder.parent
            system = any(folder == Path(d) or folder.is_relative_to(d) for d in SYSTEM_DIRS)
            if folder != Path("/") and not system and folder not in folders:
                folders.append(folder)
    return folders


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
