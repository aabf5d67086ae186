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

from agents.providers.router import ModelRouter
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from bot.access import AccessControl
from bot.brains import Brain, Shared, build_brain
from bot.budget import Budget
from bot.cluster.instances import InstanceBeacon
from bot.cluster.receivers import Cluster, cron_poll_every
from bot.cluster.stops import StopRequests
from bot.config.paths import socket_path
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.heartbeat import Heartbeat
from bot.cron.scheduler import Scheduler
from bot.gateway import Gateway
from bot.media.chat import ChatMedia
from bot.notices import OwnerLine
from bot.observe.server import MetricsServer
from bot.observe.telemetry import Telemetry, build_telemetry
from bot.operator.control_server import ControlServer, DaemonControl
from bot.owner import owner_ids, policies
from bot.process.status import DaemonStatus, StatusSource
from bot.recall.index import SearchIndex
from bot.recovery import InboxRecovery
from bot.store.roles import Store
from bot.subagent_host import LaneAnnouncer
from bot.tools.mcp import McpHost
from bot.tools.messages import ChatMessenger
from bot.upkeep import SessionUpkeep
from bot.web.hooks import HookRoutes
from bot.web.openai_api import OpenAIRoutes
from bot.web.server import DashboardAddress, Routes, WebServer
from channels.base import Channel


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
    agents: tuple[Brain, ...] = ()  # the further agents' brains (`agents:`), main's is above


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
    owners = owner_ids(config, channels)  # whose DMs see the memory files
    owner = OwnerLine(config, channels, telemetry)
    budget = Budget(agent.budget, store, owner.tell)
    gate = budget.notice if budget.enabled else None

    # What every agent shares: chats' media, the cron book, MCP servers, the messenger.
    media = ChatMedia(config, channels, telemetry)
    cron = JobBook(config, store)
    mcp = McpHost(config, telemetry.mcp_headers)
    messenger = ChatMessenger(config, store, channels, telemetry)
    announcer = LaneAnnouncer()
    shared = Shared(
        channels,
        telemetry,
        media,
        cron,
        mcp,
        messenger,
        announcer,
        budget,
        owners,
        agent.id,
        clock=clock,
        several=bool(config.agents),
    )
    # Each agent's brain (bot/brains.py): the others first, main's runner takes theirs.
    others = tuple(
        build_brain(config.for_agent(entry.id), store, shared, main=False)
        for entry in config.agents
    )
    brain = build_brain(
        config, store, shared, agents={other.agent_id: other.runner for other in others}
    )
    by_agent = {b.agent_id: b for b in (brain, *others)}  # /compact with the session's own
    client, tools, index, models = brain.client, brain.tools, brain.index, brain.models
    subagents, upkeep, runner, skills = brain.subagents, brain.upkeep, brain.runner, brain.skills
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
        compactor=lambda key: by_agent.get(key.agent, brain).upkeep.compact_now(key),
        cancel_children=lambda key: sum(  # each agent's sub-agents of the session
            b.subagents.cancel_children_of(key) for b in (brain, *others)
        ),
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
        more_heartbeats=[  # each further agent's own HEARTBEAT.md, in its own session
            Heartbeat(config.for_agent(entry.id), gateway, store) for entry in config.agents
        ],
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
    # The server also runs for webhooks or the API alone (bot/web/hooks.py, openai_api.py).
    routes = web_routes(config, store, gateway, channels)
    serving = config.web.enabled or bool(routes)
    address = DashboardAddress(config.web.listen, dashboard=config.web.enabled) if serving else None
    reporting += [address] if address is not None else []
    status = DaemonStatus(config, channels, cluster, reporting)
    beacon = InstanceBeacon(store, status.snapshot, instance_id)
    live = DaemonControl(
        config, gateway, scheduler, budget, channels, status.snapshot, gateway.commands, telemetry
    )
    control = ControlServer(socket_path(config), config, store, live)
    web = None
    if address is not None:
        web = WebServer(
            address,
            config,
            store,
            live,
            skills,
            instance_id,
            dashboard=config.web.enabled,
            routes=routes,
        )
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
        agents=others,
    )


def web_routes(
    config: Config, store: Store, gateway: Gateway, channels: Mapping[str, Channel]
) -> list[Routes]:
    """The handlers served beside the dashboard: webhooks (`hooks:`), the API (`api:`)."""
    routes: list[Routes] = []
    if config.hooks.enabled:
        routes.append(HookRoutes(config.hooks, store, gateway, channels))
    if config.api.enabled:
        routes.append(OpenAIRoutes(config.api, config.agent_ids(), store, gateway))
    return routes
