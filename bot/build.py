"""The daemon's object graph, built in one place: `build(config, store, channels, instance)`.

Every part is created here, in dependency order, and handed its collaborators in its
constructor; nothing is attached or set afterwards. Where two parts would need each other
the graph is cut by design: the `cron` tool writes through the `JobBook`, which the
scheduler (built after the gateway) waits on; sub-agent results wait in the announcer's
queue, which the gateway takes from; `/stop` from other instances is published by
`StopRequests` and applied by the cluster's listener. The telemetry (`bot/observe/`) comes
first: the model router, the loop, turns and sends report to it. The faces come last
(`bot/build_faces.py`: metrics, status, the control socket, the dashboard, webhooks and the
API): they read what the others report and change things through one `DaemonControl`. The
daemon (`bot/daemon.py`) opens the store and the adapters, calls `build`, then starts `Parts`.

`build_shared` makes what every agent uses (the chats' media, the cron book, the MCP servers,
the messenger, the announcer, the browser). Per agent (`agent:` is `main`, `agents:` the
others, each seen through `config.for_agent(id)`): `build_brain` (model router, loop, skills,
its view of the search index), `build_belt` (its tools, prompt and sub-agents), `build_agent`
(those with its compaction, upkeep and `TurnRunner`); main's runner hands a session of another
agent to that agent's runner. The wings that drive the hub (cron, the heartbeat, the control
socket) get it as the kernel's ports (`bot/kernel/ports.py`), never the Gateway itself.
Smaller builds of the same parts are in `bot/build_lite.py` (`perch chat`, doctor).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from agents.approval import Approver, ToolGate, ToolRules
from agents.cache_policy import CachePolicy
from agents.compaction import CompactionPolicy, Compactor
from agents.loop import AgentLoop
from agents.observer import NO_OBSERVER, RunObserver
from agents.pricing import context_window
from agents.prompt import PromptBuilder
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from agents.tools.cron import CronTool
from agents.tools.message import MessageTool
from bot.approvals.broker import ApprovalBroker
from bot.build_faces import build_faces
from bot.cluster.receivers import Cluster
from bot.cluster.stops import StopRequests
from bot.config.models import build_router
from bot.config.redact import Redactor
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.cron.heartbeat import Heartbeat
from bot.cron.jobs import cron_poll_every
from bot.cron.scheduler import Scheduler
from bot.fleet.cron_scope import AgentJobBook
from bot.fleet.search_scope import AgentSearch
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
from bot.kernel.people import People
from bot.kernel.ports import Outbox
from bot.media.chat import ChatMedia
from bot.observe.telemetry import OFF, Telemetry, build_telemetry
from bot.parts import AgentParts, Belt, Brain, Parts, Shared
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.recall.visibility import Owners
from bot.store.roles import Store
from bot.tools.belt import browser_pool, build_tools
from bot.tools.mcp import McpHost
from bot.tools.messages import ChatMessenger
from bot.tools.skills import skill_catalog
from channels.base import Channel

# What the memory flush before a compaction may use.
FLUSH_TOOLS = ["memory_append", "write_file", "read_file"]


def build_shared(config: Config, store: Store, outbox: Outbox, telemetry: Telemetry) -> Shared:
    """What every agent shares: the chats' media, the cron book, MCP servers, the messenger,
    the announcer of sub-agent results, the browser."""
    cron = JobBook(config, store)  # whom a run acts for is its `people` (bot/kernel/people.py)
    return Shared(
        outbox,
        telemetry,
        ChatMedia(config, outbox.channels, telemetry),
        cron,
        McpHost(config, telemetry.mcp_headers),
        ChatMessenger(config, store, outbox, people=cron.people),
        LaneAnnouncer(),
        browser_pool(config),
        config.agent.id,
        several=bool(config.agents),
    )


def build_brain(
    config: Config,
    store: Store,
    owners: Owners,
    observer: RunObserver = NO_OBSERVER,
    *,
    clock: Callable[[], float] = time.time,
    main: bool = True,
    several: bool = False,
    approver: Approver | None = None,
) -> Brain:
    """The brain of the agent `config.agent` describes; its index sees only its own part of
    the store (`AgentSearch`) when there are several agents. Every tool call passes the
    agent's rules (`agent.tools.policy`, `agent.exec.ask|allow`); `approver` is who is asked
    (None: nobody can approve here, so an "ask" is a denial)."""
    agent = config.agent
    client = build_router(config, observer)
    rules = ToolRules.of(agent.tools.policy, agent.exec.ask, agent.exec.allow)
    loop = AgentLoop(
        client,
        agent.model,
        max_iterations=agent.max_iterations,
        max_tokens=agent.max_tokens,
        max_tool_result_chars=agent.max_tool_result_chars,
        observer=observer,
        gate=ToolGate(rules, approver),
        redact=Redactor(config.secret_values()),  # tool results: no secret, no URL password
    )
    skills = skill_catalog(config)  # read by the prompt, read_skill and exec alike
    searched = AgentSearch(store, agent.id, main=main, alone=not several)
    index = SearchIndex.from_config(config, searched, skills, owners, clock=clock)
    return Brain(client, loop, skills, owners, index)


def build_belt(
    config: Config,
    store: Store,
    brain: Brain,
    shared: Shared,
    gate: Callable[[], Awaitable[str]] | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> Belt:
    """An agent's tools: the workspace's, chats', its own cron jobs', the MCP servers'
    (started lazily), the browser; then `spawn`. `gate` says why nothing may be spent now
    (the daily budget), or ""."""
    agent = config.agent
    base_tools = build_tools(
        config,
        [
            MessageTool(shared.messenger),
            CronTool(AgentJobBook(shared.cron, agent.id, shared.main_id)),
            *shared.media.tools(),
        ],
        shared.mcp.providers(),
        brain.skills,
        brain.index,
        shared.browser,
    )
    prompts = prompt_builder(config, brain, base_tools, clock)
    subagents = SubagentRunner(
        brain.loop,
        prompts,
        ChildSessions(store, brain.index),
        shared.announcer,
        tools=base_tools,
        agent_id=agent.id,
        limits=subagent_limits(config),
        timezone=agent.timezone,
        model=agent.subagents.model,
        gate=gate,
    )
    return Belt(subagents, subagents.tools, prompts)


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
    agents: Mapping[str, TurnRunner] | None = None,
    people: People | None = None,
) -> TurnRunner:
    """The turns on `brain`, each recalling first what the index holds about its message;
    `agents` are the other agents' runners, which take their own sessions."""
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
        agents=agents,
        people=people,
    )


def build_agent(
    config: Config,
    store: Store,
    shared: Shared,
    owners: Owners,
    budget: Budget,
    *,
    clock: Callable[[], float] = time.time,
    main: bool = True,
    agents: Mapping[str, TurnRunner] | None = None,
    approver: Approver | None = None,
) -> AgentParts:
    """The agent `config.agent` describes: brain, belt, compaction, upkeep and turns."""
    agent, telemetry = config.agent, shared.telemetry
    brain = build_brain(
        config,
        store,
        owners,
        telemetry.observer,
        clock=clock,
        main=main,
        several=shared.several,
        approver=approver,
    )
    gate = budget.notice if budget.enabled else None
    belt = build_belt(config, store, brain, shared, gate, clock=clock)
    models = ModelChoices(store, config)
    window = agent.context_window or context_window(agent.model)
    compaction = agent.compaction
    compactor = Compactor(
        brain.loop,
        brain.client,
        agent.model,
        CompactionPolicy(
            compaction.max_messages, compaction.context_ratio, compaction.keep_last, window
        ),
        FLUSH_TOOLS,
    )
    cache = CachePolicy(agent.cache.ttl, clock=clock)  # the prompt cache's life per session
    people = shared.cron.people  # whom each turn acts for
    upkeep = SessionUpkeep(
        config, store, compactor, belt.prompts, models, tools=belt.tools, cache=cache, people=people
    )
    runner = turn_runner(
        config,
        store,
        brain,
        belt.prompts,
        belt.tools,
        shared.outbox.channels,
        media=shared.media,
        models=models,
        after_run=[upkeep.after_run, *([budget.after_run] if budget.enabled else [])],
        telemetry=telemetry,
        cache=cache,
        agents=agents,
        people=people,
    )
    return AgentParts(agent.id, brain, belt, models, upkeep, runner, window)


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
    outbox = Outbox(channels, telemetry)  # the one road out to a chat, each send counted
    shared = build_shared(config, store, outbox, telemetry)
    # Approvals: who is asked before a risky tool runs (bot/approvals/), for every agent.
    approvals = ApprovalBroker(config, store, channels, instance_id)

    # Each agent's parts: the others first, main's runner takes their sessions.
    others = tuple(
        build_agent(
            config.for_agent(e.id),
            store,
            shared,
            owners,
            budget,
            clock=clock,
            main=False,
            approver=approvals,
        )
        for e in config.agents
    )
    runners = {other.agent_id: other.runner for other in others}
    main = build_agent(
        config, store, shared, owners, budget, clock=clock, agents=runners, approver=approvals
    )
    by_agent = {a.agent_id: a for a in (main, *others)}  # /compact with the session's own
    access = AccessControl(
        store, policies(config, list(config.channels.all())), owner.pairing_request
    )
    gateway = Gateway(
        config,
        store,
        main.runner,
        channels,
        access,
        main.models,
        budget=budget,
        remote=StopRequests(store) if store.shared else None,
        compactor=lambda key: by_agent.get(key.agent, main).upkeep.compact_now(key),
        cancel_children=lambda key: sum(  # each agent's sub-agents of the session
            a.belt.subagents.cancel_children_of(key) for a in (main, *others)
        ),
        announcements=shared.announcer,
        media=shared.media,
        telemetry=telemetry,
        window=main.window,
        on_new=[shared.browser.forget] if shared.browser is not None else (),
        approvals=approvals,
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
        shared.cron,
        heartbeat,
        telemetry=telemetry,
        budget_gate=gate,
        poll_every=cron_poll_every(store),
        more_heartbeats=[  # each further agent's own HEARTBEAT.md, in its own session
            Heartbeat(config.for_agent(e.id), gateway, outbox, store) for e in config.agents
        ],
    )
    cluster = Cluster(store, channels, config.channels, gateway, recovery)
    faces = build_faces(
        config, store, instance_id, gateway=gateway, channels=channels, cluster=cluster,
        scheduler=scheduler, budget=budget, telemetry=telemetry, mcp=shared.mcp,
        skills=main.brain.skills, index_writes=[a.brain.index.pending.flush for a in (main, *others)],
    )  # fmt: skip
    return Parts(
        client=main.brain.client,
        tools=main.belt.tools,
        mcp=shared.mcp,
        budget=budget,
        subagents=main.belt.subagents,
        announcer=shared.announcer,
        upkeep=main.upkeep,
        gateway=gateway,
        recovery=recovery,
        cron=shared.cron,
        scheduler=scheduler,
        cluster=cluster,
        status=faces.status,
        beacon=faces.beacon,
        control=faces.control,
        telemetry=telemetry,
        metrics=faces.metrics,
        web=faces.web,
        index=main.index,
        browser=shared.browser,
        agents=others,
        approvals=approvals,
    )
