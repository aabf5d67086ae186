"""The daemon's object graph, built in one place: `build(config, store, channels, instance)`.

Every part is created here, in dependency order, and handed its collaborators in its
constructor; nothing is attached or set afterwards. Where two parts would need each other
the graph is cut by design: the `cron` tool writes through the `JobBook`, which the
scheduler (built after the gateway) waits on; sub-agent results wait in the announcer's
queue, which the gateway takes from; `/stop` from other instances is published by
`StopRequests` and applied by the cluster's listener. The telemetry (metrics and traces,
`bot/observe/`) comes first: the model router, the loop, turns and sends report to it. The
dashboard (`bot/web/`, when `web.enabled`) comes last: it reads what the others report and
changes things through the same `LiveDaemon` as the control socket. The daemon
(`bot/daemon.py`) opens the store and the channels' adapters, calls `build`, then starts the
parts `Parts` holds.

`build` is made of named parts: `build_brain` (model router, loop, skills, index),
`build_belt` (the tools and the prompt), `turn_runner`. The wings that drive the hub (cron,
the heartbeat, the control socket) get it as the kernel's ports (`bot/kernel/ports.py`),
never the Gateway itself. Commands that need part of the daemon without one running take a
smaller build of the same parts: `build_chat` (`perch chat`) and `build_prompt` (`perch
doctor`'s prompt measure).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from agents.cache_policy import CachePolicy
from agents.compaction import CompactionPolicy, Compactor
from agents.loop import AgentLoop
from agents.observer import NO_OBSERVER, RunObserver
from agents.pricing import context_window
from agents.prompt import PromptBuilder
from agents.providers.router import ModelRouter
from agents.skills.catalog import SkillCatalog
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from agents.tools.browser_pool import BrowserPool
from agents.tools.cron import CronTool
from agents.tools.message import MessageTool
from bot.cluster.instances import InstanceBeacon
from bot.cluster.receivers import Cluster
from bot.cluster.stops import StopRequests
from bot.config.models import build_router
from bot.config.paths import socket_path
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.heartbeat import Heartbeat
from bot.cron.scheduler import Scheduler, cron_poll_every
from bot.hub.access import AccessControl
from bot.hub.gateway import Gateway
from bot.hub.model_choice import ModelChoices
from bot.hub.recovery import InboxRecovery
from bot.hub.subagent_host import ChildSessions, LaneAnnouncer, subagent_limits
from bot.hub.turns import SessionListener, TurnRunner
from bot.hub.upkeep import SessionUpkeep
from bot.kernel.budget import Budget
from bot.kernel.notices import OwnerLine
from bot.kernel.owner import owner_ids, policies
from bot.kernel.ports import Outbox
from bot.media.chat import ChatMedia
from bot.observe.server import MetricsServer
from bot.observe.telemetry import OFF, Telemetry, build_telemetry
from bot.operator.control_server import ControlServer, DaemonControl
from bot.process.status import DaemonStatus, StatusSource
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.recall.visibility import Owners
from bot.store.roles import Store
from bot.tools.belt import browser_pool, build_tools
from bot.tools.mcp import McpHost
from bot.tools.messages import ChatMessenger
from bot.tools.skills import skill_catalog
from bot.web.server import DashboardAddress, WebServer
from channels.base import Channel

# What the memory flush before a compaction may use.
FLUSH_TOOLS = ["memory_append", "write_file", "read_file"]


@dataclass(frozen=True, slots=True)
class Parts:
    """The built daemon: what it starts, serves and stops."""

    client: ModelRouter
    tools: ToolRegistry
    mcp: McpHost
    budget: Budget
    subagents: SubagentRunner
    announcer: LaneAnnouncer
    upkeep: SessionUpkeep
    gateway: Gateway
    recovery: InboxRecovery
    cron: JobBook
    scheduler: Scheduler
    cluster: Cluster
    status: DaemonStatus
    beacon: InstanceBeacon
    control: ControlServer
    telemetry: Telemetry
    metrics: MetricsServer | None  # GET /metrics, when metrics.enabled
    web: WebServer | None  # the dashboard, when web.enabled
    index: SearchIndex  # memory notes, conversations and skills, searched by recall and tools
    browser: BrowserPool | None = None  # agent.browser, when enabled


@dataclass(frozen=True, slots=True)
class Brain:
    """What every turn thinks with: the model client, the agent loop, the skills and the
    search index (and whose DMs see the memory files)."""

    client: ModelRouter
    loop: AgentLoop
    skills: SkillCatalog
    owners: Owners
    index: SearchIndex

    async def aclose(self) -> None:
        await self.client.aclose()
        await self.index.aclose()


@dataclass(frozen=True, slots=True)
class Belt:
    """The daemon's tools and the prompt that lists them, with the parts they write through."""

    media: ChatMedia
    cron: JobBook
    mcp: McpHost
    browser: BrowserPool | None  # agent.browser, started on first use
    announcer: LaneAnnouncer
    subagents: SubagentRunner
    tools: ToolRegistry  # the base tools and `spawn`
    prompts: PromptBuilder


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """The smaller build `perch chat` runs one turn on when no daemon runs: no channels, so no
    `message`, `cron` or `spawn` tools; the turn is saved like any other."""

    brain: Brain
    budget: Budget
    runner: TurnRunner


def build_brain(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel],
    observer: RunObserver = NO_OBSERVER,
    *,
    clock: Callable[[], float] = time.time,
) -> Brain:
    agent = config.agent
    client = build_router(config, observer)
    loop = AgentLoop(
        client,
        agent.model,
        max_iterations=agent.max_iterations,
        max_tokens=agent.max_tokens,
        max_tool_result_chars=agent.max_tool_result_chars,
        observer=observer,
    )
    skills = skill_catalog(config)  # read by the prompt, read_skill and exec alike
    owners = owner_ids(config, channels)  # whose DMs see the memory files
    index = SearchIndex.from_config(config, store, skills, owners, clock=clock)
    return Brain(client, loop, skills, owners, index)


def build_belt(
    config: Config,
    store: Store,
    brain: Brain,
    outbox: Outbox,
    telemetry: Telemetry,
    gate: Callable[[], Awaitable[str]] | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Belt:
    """The tools: the workspace's, chats', cron's and the MCP servers' (started lazily); then
    `spawn`. `gate` says why nothing may be spent now (the daily budget), or ""."""
    agent = config.agent
    media = ChatMedia(config, outbox.channels, telemetry)
    cron = JobBook(config, store)
    mcp = McpHost(config, telemetry.mcp_headers)
    browser = browser_pool(config)
    messenger = ChatMessenger(config, store, outbox)
    base_tools = build_tools(
        config,
        [MessageTool(messenger), CronTool(cron), *media.tools()],
        mcp.providers(),
        brain.skills,
        brain.index,
        browser,
    )
    prompts = prompt_builder(config, brain, base_tools, clock)
    announcer = LaneAnnouncer()
    subagents = SubagentRunner(
        brain.loop,
        prompts,
        ChildSessions(store, brain.index),
        announcer,
        tools=base_tools,
        agent_id=agent.id,
        limits=subagent_limits(config),
        timezone=agent.timezone,
        model=agent.subagents.model,
        gate=gate,
    )
    return Belt(media, cron, mcp, browser, announcer, subagents, subagents.tools, prompts)


def prompt_builder(
    config: Config, brain: Brain, tools: ToolRegistry, clock: Callable[[], float] = time.time
) -> PromptBuilder:
    # The skills are listed in the prompt only where read_skill is on the belt (agent.tools).
    listed = brain.skills if "read_skill" in tools else None
    return PromptBuilder(config.workspace, skills=listed, clock=clock)


def turn_runner(
    config: Config,
    store: Store,
    brain: Brain,
    prompts: PromptBuilder,
    tools: ToolRegistry,
    channels: Mapping[str, Channel],
    *,
    media: ChatMedia | None = None,
    models: ModelChoices | None = None,
    after_run: Sequence[SessionListener] = (),
    telemetry: Telemetry = OFF,
    cache: CachePolicy | None = None,
) -> TurnRunner:
    """The turns on `brain`, each recalling first what the index holds about its message."""
    agent = config.agent
    return TurnRunner(
        config,
        store,
        brain.loop,
        prompts,
        tools,
        channels,
        media=media,
        models=models,
        after_run=after_run,
        telemetry=telemetry,
        cache=cache,
        recall=TurnRecall(agent.recall, brain.index, brain.owners, agent.timezone, brain.skills),
        index=brain.index,
    )


def build_chat(config: Config, store: Store) -> ChatTurn:
    """`perch chat` without a daemon: the daemon's brain and workspace tools, no channels."""
    brain = build_brain(config, store, {})
    tools = build_tools(config, skills=brain.skills, index=brain.index)
    runner = turn_runner(config, store, brain, prompt_builder(config, brain, tools), tools, {})
    return ChatTurn(brain, Budget(config.agent.budget, store), runner)


def build_prompt(config: Config, store: Store) -> tuple[Brain, Belt]:
    """`perch doctor`'s prompt measure: the daemon's brain and tool belt without channels
    (MCP servers are not started, so their tools are not counted)."""
    brain = build_brain(config, store, {})
    return brain, build_belt(config, store, brain, Outbox({}), OFF)


def build(
    config: Config,
    store: Store,
    channels: Mapping[str, Channel],
    instance_id: str,
    *,
    clock: Callable[[], float] = time.time,
) -> Parts:
    """Create every part of a daemon on an open `store` with built `channels` adapters.
    `clock` is the time the prompts and the prompt cache's pacing read (a benchmark replays
    a conversation at its own pace with it)."""
    agent = config.agent
    telemetry = build_telemetry(config, instance_id)
    brain = build_brain(config, store, channels, telemetry.observer, clock=clock)
    client, loop, index = brain.client, brain.loop, brain.index
    models = ModelChoices(store, config)
    owner = OwnerLine(config, channels, telemetry)
    budget = Budget(agent.budget, store, owner.tell)
    gate = budget.notice if budget.enabled else None
    outbox = Outbox(channels, telemetry)  # the one road out to a chat, each send counted
    belt = build_belt(config, store, brain, outbox, telemetry, gate, clock=clock)
    media, cron, mcp, tools, prompts = belt.media, belt.cron, belt.mcp, belt.tools, belt.prompts
    announcer, subagents = belt.announcer, belt.subagents

    # A turn, the upkeep after it, and the gateway that admits it.
    window = agent.context_window or context_window(agent.model)
    compaction = agent.compaction
    compactor = Compactor(
        loop,
        client,
        agent.model,
        CompactionPolicy(
            compaction.max_messages, compaction.context_ratio, compaction.keep_last, window
        ),
        FLUSH_TOOLS,
    )
    cache = CachePolicy(agent.cache.ttl, clock=clock)  # the prompt cache's life per session
    upkeep = SessionUpkeep(config, store, compactor, prompts, models, tools=tools, cache=cache)
    runner = turn_runner(
        config,
        store,
        brain,
        prompts,
        tools,
        channels,
        media=media,
        models=models,
        after_run=[upkeep.after_run, *([budget.after_run] if budget.enabled else [])],
        telemetry=telemetry,
        cache=cache,
    )
    access = AccessControl(
        store, policies(config, list(config.channels.all())), owner.pairing_request
    )
    gateway = Gateway(
        config,
        store,
        runner,
        channels,
        access,
        models,
        budget=budget,
        remote=StopRequests(store) if store.shared else None,
        compactor=upkeep.compact_now,
        cancel_children=subagents.cancel_children_of,
        announcements=announcer,
        media=media,
        telemetry=telemetry,
        window=window,
        on_new=[belt.browser.forget] if belt.browser is not None else (),
    )
    recovery = InboxRecovery(config, store, gateway)

    # What runs on its own: heartbeat and cron, the receivers, the instance's beat.
    # Cron and the heartbeat reach the gateway as `SystemTurns` only (bot/kernel/ports.py).
    heartbeat = Heartbeat(config, gateway, outbox, store)
    scheduler = Scheduler(
        config,
        store,
        gateway,
        outbox,
        cron,
        heartbeat,
        telemetry=telemetry,
        budget_gate=gate,
        poll_every=cron_poll_every(store),
    )
    cluster = Cluster(store, channels, config.channels, gateway, recovery)
    metrics = None
    if telemetry.metrics is not None:
        metrics = MetricsServer(
            config.metrics, telemetry.metrics, channels, cluster, gateway, store, budget
        )
    reporting: list[StatusSource] = [gateway, scheduler, mcp, telemetry]
    reporting += [metrics] if metrics is not None else []
    # The dashboard's address is made first: the status reports it, the server binds it.
    address = DashboardAddress(config.web.listen) if config.web.enabled else None
    reporting += [address] if address is not None else []
    status = DaemonStatus(config, channels, cluster, reporting)
    beacon = InstanceBeacon(store, status.snapshot, instance_id)
    live = DaemonControl(
        config, gateway, scheduler, budget, channels, status.snapshot, gateway.commands, telemetry
    )
    control = ControlServer(socket_path(config), config, store, live)
    web = None
    if address is not None:
        web = WebServer(address, config, store, live, brain.skills, instance_id)
    return Parts(
        client=client,
        tools=tools,
        mcp=mcp,
        budget=budget,
        subagents=subagents,
        announcer=announcer,
        upkeep=upkeep,
        gateway=gateway,
        recovery=recovery,
        cron=cron,
        scheduler=scheduler,
        cluster=cluster,
        status=status,
        beacon=beacon,
        control=control,
        telemetry=telemetry,
        metrics=metrics,
        web=web,
        index=index,
        browser=belt.browser,
    )
