"""The daemon's lifecycle: build every part from the config, run, and shut down cleanly.

`Daemon(config).start()` opens the store, seeds the workspace, builds the model client, the
agent loop, the tools, the channels (`channels.registry.build_channels`: the enabled plug-ins,
by config key; this module names no platform) and the gateway, starts each channel (one that
cannot reach its platform keeps retrying in its adapter; the daemon keeps running), re-runs
what a crash left in the inbox, and tells systemd it is READY. Start is exception-safe: if
any step raises, what was opened (adapters, store thread, instance lock) is closed again and
`StartupError` names the step in one line. `stop()` is the SIGTERM path: stop intake, let
runs finish up to `gateway.shutdown_grace`, cancel the rest cleanly, close the channels and
the store; a part that fails to stop is logged and the rest still close.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import signal as signals
import socket
import time
from pathlib import Path
from typing import Any

from agents.compaction import CompactionPolicy, Compactor
from agents.loop import AgentLoop
from agents.prompt import PromptBuilder
from agents.providers.router import ModelRouter
from agents.spawn_tool import SpawnTool
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from agents.tools.cron import CronTool
from agents.tools.message import MessageTool
from bot.access import AccessControl
from bot.budget import Budget
from bot.cluster.instances import InstanceBeacon
from bot.cluster.receivers import STANDBY, Cluster, beat_every, cron_poll_every
from bot.config.providers import build_router
from bot.config.schema import Config
from bot.cron.scheduler import Scheduler
from bot.gateway import Gateway
from bot.mcp_host import McpHost
from bot.media.chat import ChatMedia
from bot.message_targets import ChatMessenger
from bot.notices import install_guards
from bot.operator.control_server import ControlServer, start_control
from bot.owner import policies
from bot.process.hardening import make_undumpable
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import AlreadyRunning as StoreAlreadyRunning
from bot.store.urls import redact_url
from bot.subagent_host import LaneAnnouncer, build_subagents
from bot.toolbelt import build_tools
from bot.turns import TurnRunner
from bot.upkeep import SessionUpkeep
from bot.workspace import seed_workspace
from channels.base import Channel
from channels.registry import build_channels

log = logging.getLogger(__name__)


class Daemon:
    def __init__(self, config: Config, *, channels: dict[str, Channel] | None = None) -> None:
        self.config = config
        self._given_channels = channels
        self.store: Store | None = None
        self.gateway: Gateway | None = None
        self.client: ModelRouter | None = None
        self.channels: dict[str, Channel] = {}
        self.tools = ToolRegistry()
        self.stopping = asyncio.Event()
        self.started_at = 0.0
        self._status_task: asyncio.Task[None] | None = None
        self._warm_task: asyncio.Task[None] | None = None
        self.upkeep: SessionUpkeep | None = None
        self.subagents: SubagentRunner | None = None
        self.announcer: LaneAnnouncer | None = None
        self.scheduler: Scheduler | None = None
        self._stopped = False
        self.beacon: InstanceBeacon | None = None  # set once the instance lock is held
        self.cluster: Cluster | None = None
        self._opened: dict[str, Channel] = {}  # channels whose start() was called
        self._step = "starting"
        self.budget: Budget | None = None
        self.control: ControlServer | None = None
        self.mcp = McpHost(config)

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
        self.store = await open_store(config.store_target)
        self._step = "taking the instance lock"
        try:
            instance_id = await self.store.hold_instance()
        except StoreAlreadyRunning as exc:
            raise AlreadyRunning(str(exc)) from None
        self.store.lease = config.store.lease
        self.beacon = InstanceBeacon(self.store, self.status, instance_id)
        self._step = "building the daemon"
        copied = seed_workspace(config.workspace)
        if copied:
            log.info("workspace %s seeded with %s", config.workspace, ", ".join(copied))
        self.client = build_router(config)
        agent_loop = AgentLoop(
            self.client,
            config.agent.model,
            max_iterations=config.agent.max_iterations,
            max_tokens=config.agent.max_tokens,
            max_tool_result_chars=config.agent.max_tool_result_chars,
        )
        prompts = PromptBuilder(config.workspace)
        self.channels = (
            self._given_channels
            if self._given_channels is not None
            else build_channels(config.channels, self.request_stop)
        )
        self.subagents, self.announcer = build_subagents(config, self.store, agent_loop, prompts)
        messenger = ChatMessenger(config, self.store, self.channels)
        self.scheduler = Scheduler(config, self.store, poll_every=cron_poll_every(self.store))
        media = ChatMedia(config, self.channels)
        self.tools = build_tools(
            config,
            [
                SpawnTool(self.subagents),
                MessageTool(messenger),
                CronTool(self.scheduler),
                *media.tools(),
            ],
            self.mcp.start(),
        )
        self.subagents.use_tools(self.tools)
        runner = TurnRunner(config, self.store, agent_loop, prompts, self.tools, self.channels)
        runner.media = media
        access = AccessControl(self.store, policies(config, list(config.channels.all())))
        self.gateway = Gateway(config, self.store, runner, self.channels, access)
        compaction = config.agent.compaction
        compactor = Compactor(
            agent_loop,
            self.client,
            config.agent.model,
            CompactionPolicy(
                compaction.max_messages,
                compaction.context_ratio,
                compaction.keep_last,
                runner.window,
            ),
            self.tools.restricted(allow=["memory_append", "write_file", "read_file"]),
        )
        self.upkeep = SessionUpkeep(config, self.store, compactor, prompts)
        runner.add_usage_listener(self.upkeep.after_run)
        self.gateway.compactor = self.upkeep.compact_now
        runner.models = self.upkeep.models = self.gateway.commands.models
        self.announcer.bind(self.gateway)
        self.gateway.cancel_children = self.subagents.cancel_children_of
        self.budget = install_guards(self)
        self.cluster = Cluster(
            self.store, list(self.channels), config.channels, self._open, self._close
        )
        self.cluster.attach(self.gateway)
        self._step = "taking the lead of single-receiver channels"
        await self.cluster.take_leads()  # starts those this instance leads
        for name in self.channels:
            # An adapter retries unreachable platforms itself; one that raises is broken.
            self._step = f"starting channel {name}"
            if name not in self.cluster.followers:
                await self._open(name)
        self._step = "re-running unfinished messages"
        recovered = await self.gateway.recover()
        if recovered:
            log.info("re-running %d message(s) left unfinished by the last run", recovered)
        self._step = "starting the scheduler"
        await self.scheduler.start(self.gateway)
        self.control = await start_control(self)
        self.started_at = time.time()
        self._status_task = asyncio.create_task(self._write_status_forever())
        log.info(
            "Perch ready in %.0f ms: model %s, channels %s, workspace %s",
            (time.perf_counter() - began) * 1000,
            config.agent.model,
            ", ".join(self.channels) or "none",
            config.workspace,
        )
        sd_notify("READY=1\nSTATUS=Perch is running")
        if config.agent.preload_model:  # off the critical path of the first reply
            self._warm_task = asyncio.create_task(self.client.warm())

    async def _open(self, name: str) -> None:
        assert self.gateway is not None
        channel = self.channels[name]
        self._opened[name] = channel
        await channel.start(self.gateway.on_message)
        log.info("channel %s: %s", name, channel.status().detail or "started")

    async def _close(self, name: str) -> None:
        channel = self._opened.pop(name, None)
        if channel is not None:
            try:
                await asyncio.wait_for(channel.stop(), timeout=5)
            except Exception as exc:
                log.warning("channel %s did not stop cleanly: %s", name, exc)

    def request_stop(self) -> None:
        self.stopping.set()

    def _on_signal(self) -> None:
        """The first SIGINT/SIGTERM stops cleanly; a second one (Ctrl-C again) exits now."""
        if self.stopping.is_set():
            log.warning("second interrupt: exiting at once without a clean shutdown")
            os._exit(130)
        self.request_stop()

    async def run(self) -> None:
        """Start, then serve until SIGINT/SIGTERM (or `request_stop`), then stop."""
        make_undumpable()  # same-user processes can't read our /proc/<pid>/environ or memory
        loop = asyncio.get_running_loop()
        for sig in (signals.SIGINT, signals.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal)
        await self.start()
        self.freeze_startup_objects()
        watchdog = asyncio.create_task(_watchdog())
        try:
            await self.stopping.wait()
        finally:
            watchdog.cancel()
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
        if self._status_task is not None:
            self._status_task.cancel()
        if self._warm_task is not None:
            self._warm_task.cancel()
        if self.control is not None:
            await self.control.stop()
        if self.gateway is not None:
            cancelled = await self.gateway.drain(self.config.gateway.shutdown_grace)
            if cancelled:
                log.warning("cancelled %d run(s) that did not finish in time", cancelled)
        for part, close in (
            ("cluster", self.cluster.close if self.cluster else None),
            ("scheduler", self.scheduler.stop if self.scheduler else None),
            ("mcp servers", self.mcp.stop),
            ("sub-agents", self.subagents.aclose if self.subagents else None),
            ("announcer", self.announcer.aclose if self.announcer else None),
            ("upkeep", self.upkeep.stop if self.upkeep else None),
        ):
            if close is None:
                continue
            try:
                await close()
            except Exception as exc:  # one broken part must not keep the store open
                log.warning("%s did not stop cleanly: %s", part, exc)
        for name, channel in self._opened.items():
            try:
                await asyncio.wait_for(channel.stop(), timeout=5)
            except Exception as exc:
                log.warning("channel %s did not stop cleanly: %s", name, exc)
        if self.client is not None:
            await self.client.aclose()
        if self.store is not None:
            if self.beacon is not None:
                await self.beacon.gone()
            try:
                await asyncio.wait_for(self.store.close(), timeout=5)
            except Exception as exc:
                log.warning("the store did not close cleanly: %s", exc)
        if self.beacon is not None:  # else the status file is another daemon's
            status_path(self.config).unlink(missing_ok=True)
        log.info("stopped")

    def status(self) -> dict[str, Any]:
        gateway = self.gateway.status() if self.gateway else {}
        return {
            "pid": os.getpid(),
            "started_at": self.started_at,
            "updated_at": time.time(),
            "model": self.config.agent.model,
            "channels": {
                name: {"up": s.up, "detail": s.detail}
                if self.cluster is None or not self.cluster.standby(name)
                else {"up": False, "detail": STANDBY, "standby": True}
                for name, s in ((n, c.status()) for n, c in self.channels.items())
            },
            "leads": sorted(self.cluster.leading) if self.cluster else [],
            **gateway,
            **(self.scheduler.status() if self.scheduler else {}),
            **self.mcp.status(),
        }

    def write_status(self) -> None:
        """Write `status.json` next to the database (what `perch status` reads)."""
        path = status_path(self.config)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # no SQLite file made it (PostgreSQL)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.status(), indent=1))
            tmp.replace(path)
        except OSError as exc:
            log.debug("could not write %s: %s", path, exc)

    async def _write_status_forever(self) -> None:
        while True:
            self.write_status()
            if self.beacon is not None:
                await self.beacon.beat()
            if self.cluster is not None and self.store is not None:
                await self.cluster.tick(self.gateway)
            await asyncio.sleep(beat_every(self.store.lease) if self.store else 5)


class StartupError(RuntimeError):
    """The daemon could not start; the message says which step failed and why."""


class AlreadyRunning(StartupError):
    """Another Perch process serves this database."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def status_path(config: Config) -> Path:
    return config.db_path.with_name("status.json")


def sd_notify(message: str) -> bool:
    """Send a systemd notification if NOTIFY_SOCKET is set; a no-op otherwise."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError as exc:
        log.debug("sd_notify failed: %s", exc)
        return False


async def _watchdog() -> None:
    usec = os.environ.get("WATCHDOG_USEC")
    if not usec:
        return
    interval = max(int(usec) / 1_000_000 / 2, 0.5)
    while True:
        sd_notify("WATCHDOG=1")
        await asyncio.sleep(interval)
