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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agents.cache_policy import CachePolicy
from agents.compaction import CompactionPolicy, Compactor
from agents.loop import AgentLoop
from agents.pricing import context_window
from agents.prompt import PromptBuilder
from agents.providers.router import ModelRouter
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from agents.tools.cron import CronTool
from agents.tools.message import MessageTool
from bot.access import AccessControl
from bot.budget import Budget
from bot.cluster.instances import InstanceBeacon
from bot.cluster.receivers import Cluster, cron_poll_every
from bot.cluster.stops import StopRequests
from bot.config.paths import socket_path
from bot.config.providers import build_router
from bot.config.redact import Redactor
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.heartbeat import Heartbeat
from bot.cron.scheduler import Scheduler
from bot.gateway import Gateway
from bot.media.chat import ChatMedia
from bot.model_choice import ModelChoices
from bot.notices import OwnerLine
from bot.observe.server import MetricsServer
from bot.observe.telemetry import Telemetry, build_telemetry
from bot.operator.control_server import ControlServer, DaemonControl
from bot.owner import owner_ids, policies
from bot.process.status import DaemonStatus, StatusSource
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.recovery import InboxRecovery
from bot.store.roles import Store
from bot.subagent_host import ChildSessions, LaneAnnouncer, subagent_limits
from bot.tools.belt import build_tools
from bot.tools.mcp import McpHost
from bot.tools.messages import ChatMessenger
from bot.tools.skills import skill_catalog
from bot.turns import TurnRunner
from bot.upkeep import SessionUpkeep
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
    client = build_router(config, telemetry.observer)
    loop = AgentLoop(
        client,
        agent.model,
        max_iterations=agent.max_iterations,
        max_tokens=agent.max_tokens,
        max_tool_result_chars=agent.max_tool_result_chars,
        observer=telemetry.observer,
        redact=Redactor(config.secret_values()),  # tool results: no secret, no URL password
    )
    skills = skill_catalog(config)  # read by the prompt, read_skill and exec alike
    owners = owner_ids(config, channels)  # whose DMs see the memory files
    index = SearchIndex.from_config(config, store, skills, owners, clock=clock)
    models = ModelChoices(store, config)
    owner = OwnerLine(config, channels, telemetry)
    budget = Budget(agent.budget, store, owner.tell)
    gate = budget.notice if budget.enabled else None

    # The tools: the workspace's, chats', cron's and the MCP servers'; then `spawn`.
    media = ChatMedia(config, channels, telemetry)
    cron = JobBook(config, store)
    mcp = McpHost(config, telemetry.mcp_headers)
    messenger = ChatMessenger(config, store, channels, telemetry, people=cron.people)
    base_tools = build_tools(
        config,
        [MessageTool(messenger), CronTool(cron), *media.tools()],
        mcp.providers(),
        skills,
        index,
    )
    # The skills are listed in the prompt only where read_skill is on the belt (agent.tools).
    prompts = PromptBuilder(
        config.workspace, skills=skills if "read_skill" in base_tools else None, clock=clock
    )
    announcer = LaneAnnouncer()
    subagents = SubagentRunner(
        loop,
        prompts,
        ChildSessions(store, index),
        announcer,
        tools=base_tools,
        agent_id=agent.id,
        limits=subagent_limits(config),
        timezone=agent.timezone,
        model=agent.subagents.model,
        gate=gate,
    )
    tools = subagents.tools  # the base tools and `spawn`

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
    upkeep = SessionUpkeep(
        config, store, compactor, prompts, models, tools=tools, cache=cache, people=cron.people
    )
    runner = TurnRunner(
        config,
        store,
        loop,
        prompts,
        tools,
        channels,
        media=media,
        models=models,
        after_run=[upkeep.after_run, *([budget.after_run] if budget.enabled else [])],
        telemetry=telemetry,
        cache=cache,
        recall=TurnRecall(agent.recall, index, owners, agent.timezone, skills),
        index=index,
        people=cron.people,
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
    )
    recovery = InboxRecovery(config, store, gateway)

    # What runs on its own: heartbeat and cron, the receivers, the instance's beat.
    heartbeat = Heartbeat(config, gateway, store)
    scheduler = Scheduler(
        config,
        store,
        gateway,
        cron,
        heartbeat,
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
        web = WebServer(address, config, store, live, skills, instance_id)
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
    )
