"""The daemon's lifecycle: open the store, build the parts, run, and shut down cleanly.

`Daemon(config).start()` opens the store and takes the instance lock, seeds the workspace,
builds the channels' adapters (`channels.registry.build_channels`: the enabled plug-ins, by
config key; this module names no platform) and every other part (`bot/build.py`, the whole
object graph in one place), then starts them: MCP servers, the channels (one that cannot
reach its platform keeps retrying in its adapter; the daemon keeps running), crash recovery
of the inbox, sub-agent announcements, the scheduler, the control socket and (when on) the
metrics endpoint, and tells systemd it is READY. The dashboard (when on) starts first of all,
so its Logs page has the channels' start-up lines. Start is exception-safe: if any step raises, what was opened
(adapters, store thread, instance lock) is closed again and `StartupError` names the step in
one line. `stop()` is the SIGTERM path: stop intake, let runs finish up to
`gateway.shutdown_grace`, cancel the rest cleanly, close the parts, the channels and the
store; a part that fails to stop is logged and the rest still close.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal as signals
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from bot.build import Parts, build
from bot.cluster.instances import InstanceBeacon, beat_every
from bot.config.paths import status_path
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.scheduler import Scheduler
from bot.hub.gateway import Gateway
from bot.hub.upkeep import SessionUpkeep
from bot.kernel.heap import HeapTrim
from bot.kernel.workspace import seed_workspace
from bot.process.hardening import make_undumpable
from bot.process.status import write_status
from bot.process.systemd import sd_notify, watchdog
from bot.store.channel_state import StoreChannelState
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import AlreadyRunning as StoreAlreadyRunning
from bot.store.urls import redact_url
from channels.base import Channel, Terminal
from channels.registry import build_channels

log = logging.getLogger(__name__)


class Daemon:
    def __init__(self, config: Config, *, channels: dict[str, Channel] | None = None) -> None:
        self.config = config
        self._given_channels = channels
        self.channels: dict[str, Channel] = {}
        self.store: Store | None = None
        self.parts: Parts | None = None
        self.stopping = asyncio.Event()
        self._status_task: asyncio.Task[None] | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self._index_task: asyncio.Task[None] | None = None
        self._stopped = False
        self._step = "starting"
        self.heap = HeapTrim()  # freed heap memory back to the system, on the beat

    # The parts, for the control paths and the tests (None until built).
    @property
    def gateway(self) -> Gateway | None:
        return self.parts.gateway if self.parts else None

    @property
    def scheduler(self) -> Scheduler | None:
        return self.parts.scheduler if self.parts else None

    @property
    def cron(self) -> JobBook | None:
        return self.parts.cron if self.parts else None

    @property
    def subagents(self) -> SubagentRunner | None:
        return self.parts.subagents if self.parts else None

    @property
    def upkeep(self) -> SessionUpkeep | None:
        return self.parts.upkeep if self.parts else None

    @property
    def beacon(self) -> InstanceBeacon | None:
        return self.parts.beacon if self.parts else None

    @property
    def tools(self) -> ToolRegistry:
        return self.parts.tools if self.parts else ToolRegistry()

    async def start(self) -> None:
        """Build and start everything; on any failure close what was opened, then raise
        `StartupError` (one line: what failed and why) or `AlreadyRunning`."""
        try:
            await self._start()
        except BaseException as exc:
            step, self._step = self._step, "stopping"
            with contextlib.suppress(Exception):
                await self.stop()
            if isinstance(exc, AlreadyRunning | asyncio.CancelledError | KeyboardInterrupt):
                raise
            raise StartupError(f"{step} failed: {_one_line(exc)}") from exc

    async def _start(self) -> None:
        began = time.perf_counter()
        config = self.config
        self._step = f"opening the store {redact_url(str(config.store_target))}"
        self.store = store = await open_store(config.store_target, lease=config.store.lease)
        self._step = "taking the instance lock"
        try:
            instance_id = await store.hold_instance()
        except StoreAlreadyRunning as exc:
            raise AlreadyRunning(str(exc)) from None
        self._step = "building the daemon"
        for agent_id in config.agent_ids():  # each agent's own workspace (`agents:`)
            workspace = config.for_agent(agent_id).workspace
            copied = seed_workspace(workspace)
            if copied:
                log.info("workspace %s seeded with %s", workspace, ", ".join(copied))
        self.channels = (
            self._given_channels
            if self._given_channels is not None
            else build_channels(
                config.channels,
                self.request_stop,
                config.db_path.parent,
                lambda key: StoreChannelState(store, key),
            )
        )
        self.parts = parts = build(config, store, self.channels, instance_id)
        if parts.web is not None:
            self._step = f"serving the dashboard on {config.web.listen}"
            await parts.web.start()
        parts.mcp.start()  # servers come up in the background while the rest starts
        self._step = "taking the lead of single-receiver channels"
        await parts.cluster.take_leads()  # starts those this instance leads
        for name in parts.cluster.local():
            self._step = f"starting channel {name}"
            await parts.cluster.open(name)
        parts.cluster.listen()
        self._step = "re-running unfinished messages"
        recovered = await parts.recovery.recover()
        if recovered:
            log.info("re-running %d message(s) left unfinished by the last run", recovered)
        parts.gateway.start()
        if parts.approvals is not None:  # what a restart left pending is denied, and said so
            await parts.approvals.start()
        self._step = "starting the scheduler"
        await parts.scheduler.start()
        await parts.control.start()
        if parts.metrics is not None:
            self._step = f"serving metrics on {config.metrics.listen}"
            await parts.metrics.start()
        self._status_task = asyncio.create_task(self._write_status_forever(parts))
        log.info(
            "Perch ready in %.0f ms: model %s, channels %s, workspace %s",
            (time.perf_counter() - began) * 1000,
            config.agent.model,
            ", ".join(self.channels) or "none",
            config.workspace,
        )
        sd_notify("READY=1\nSTATUS=Perch is running")
        if config.agent.preload_model:  # off the critical path of the first reply
            self._warm_task = asyncio.create_task(parts.client.warm())
        self._index_task = asyncio.create_task(self._index_once(parts))

    async def _index_once(self, parts: Parts) -> None:
        """The search index brought up to date in the background: memory files and skills,
        and the stored conversations if they were never indexed (an older store)."""
        await parts.index.refresh()
        await parts.index.ensure_built()
        for brain in parts.agents:  # the other agents' memory files and skills
            await brain.index.refresh()

    def request_stop(self) -> None:
        self.stopping.set()

    def _on_signal(self) -> None:
        """The first SIGINT/SIGTERM stops cleanly and says what it waits for; a second one
        (Ctrl-C again) exits now, the terminal given back first."""
        terminals = [c for c in self.channels.values() if isinstance(c, Terminal)]
        if self.stopping.is_set():
            log.warning("second interrupt: exiting at once without a clean shutdown")
            for terminal in terminals:
                terminal.release()
            os._exit(130)
        self.request_stop()
        text = self.waiting_for()
        log.info("%s", text)
        for terminal in terminals:
            terminal.notice(text)

    def waiting_for(self) -> str:
        """What a clean stop waits for, in a sentence (shown on the first Ctrl-C)."""
        parts = self.parts
        runs = int(parts.gateway.status().get("active_runs", 0)) if parts else 0
        servers = len(parts.mcp.status().get("mcp", {})) if parts else 0
        waits = []
        if runs:
            grace = self.config.gateway.shutdown_grace
            waits.append(f"{runs} running repl{'y' if runs == 1 else 'ies'} (up to {grace:g} s)")
        if servers:
            waits.append(f"{servers} MCP server{'' if servers == 1 else 's'} to stop")
        again = "Press Ctrl-C again to quit at once."
        if not waits:
            return f"Stopping Perch (nothing is running). {again}"
        return f"Stopping Perch: waiting for {' and '.join(waits)}. {again}"

    async def run(self) -> None:
        """Start, then serve until SIGINT/SIGTERM (or `request_stop`), then stop."""
        make_undumpable()  # same-user processes can't read our /proc/<pid>/environ or memory
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal)
        await self.start()
        self.freeze_startup_objects()
        keep_alive = asyncio.create_task(watchdog())
        try:
            await self.stopping.wait()
        finally:
            keep_alive.cancel()
            await self.stop()

    def freeze_startup_objects(self) -> None:
        """What start-up built lives as long as the process: keep the collector off it (a full
        collection otherwise walks it all, ~80 ms every few hundred turns); again once the
        model SDK is loaded (58 ms a collection). For a process that runs one daemon."""
        gc.freeze()
        if self._warm_task is not None:
            self._warm_task.add_done_callback(lambda _: gc.freeze())

    async def stop(self) -> None:
        """Shut down (see the module docstring); calling it again does nothing."""
        if self._stopped:
            return
        self._stopped = True
        sd_notify("STOPPING=1\nSTATUS=Perch is shutting down")
        log.info("shutting down")
        for task in (self._status_task, self._warm_task, self._index_task):
            if task is not None:
                task.cancel()
        parts = self.parts
        if parts is not None:
            await parts.control.stop()
            if parts.web is not None:
                await parts.web.stop()
            if parts.metrics is not None:
                await parts.metrics.stop()
            cancelled = await parts.gateway.drain(self.config.gateway.shutdown_grace)
            if cancelled:
                log.warning("cancelled %d run(s) that did not finish in time", cancelled)
            closing: list[tuple[str, Callable[[], Awaitable[None]]]] = [
                ("scheduler", parts.scheduler.stop),
                ("mcp servers", parts.mcp.stop),
                *([("browser", parts.browser.aclose)] if parts.browser is not None else []),
                ("sub-agents", parts.subagents.aclose),
                ("announcer", parts.announcer.aclose),
                ("upkeep", parts.upkeep.stop),
                ("channels", parts.cluster.close),
                ("model client", parts.client.aclose),
                ("search index", parts.index.aclose),  # its embeddings' client
                *((f"agent {b.agent_id}", b.aclose) for b in parts.agents),
                ("telemetry", parts.telemetry.aclose),  # the last spans, within a bound
                ("instance row", parts.beacon.gone),
            ]
            for part, close in closing:
                try:
                    await close()
                except Exception as exc:  # one broken part must not keep the store open
                    log.warning("%s did not stop cleanly: %s", part, exc)
        if self.store is not None:
            try:
                await asyncio.wait_for(self.store.close(), timeout=5)
            except Exception as exc:
                log.warning("the store did not close cleanly: %s", exc)
        if parts is not None:  # else the status file is another daemon's
            status_path(self.config).unlink(missing_ok=True)
        log.info("stopped")

    def status(self) -> dict[str, Any]:
        return self.parts.status.snapshot() if self.parts else {}

    def write_status(self) -> None:
        """Write `status.json` next to the database (what `perch status` reads)."""
        write_status(status_path(self.config), self.status())

    async def _write_status_forever(self, parts: Parts) -> None:
        assert self.store is not None
        while True:
            self.write_status()
            await parts.beacon.beat()
            await parts.cluster.tick()
            await self.heap.tick()
            await asyncio.sleep(beat_every(self.store.lease))


class StartupError(RuntimeError):
    """The daemon could not start; the message says which step failed and why."""


class AlreadyRunning(StartupError):
    """Another Perch process serves this database."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"
