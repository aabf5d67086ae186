"""The built daemon's parts, as `bot/build.py` makes them: what is shared by every agent,
each agent's brain, belt and turns, the smaller build `perch chat` runs on, and `Parts`, what
the daemon starts, serves and stops. Only types here: nothing is made in this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.loop import AgentLoop
    from agents.prompt import PromptBuilder
    from agents.providers.router import ModelRouter
    from agents.skills.catalog import SkillCatalog
    from agents.subagents import SubagentRunner
    from agents.tools.base import ToolRegistry
    from agents.tools.browser_pool import BrowserPool
    from bot.approvals.broker import ApprovalBroker
    from bot.cluster.instances import InstanceBeacon
    from bot.cluster.receivers import Cluster
    from bot.cron.book import JobBook
    from bot.cron.scheduler import Scheduler
    from bot.hub.gateway import Gateway
    from bot.hub.model_choice import ModelChoices
    from bot.hub.recovery import InboxRecovery
    from bot.hub.subagent_host import LaneAnnouncer
    from bot.hub.turns import TurnRunner
    from bot.hub.upkeep import SessionUpkeep
    from bot.kernel.budget import Budget
    from bot.kernel.ports import Outbox
    from bot.media.chat import ChatMedia
    from bot.observe.server import MetricsServer
    from bot.observe.telemetry import Telemetry
    from bot.operator.control_server import ControlServer
    from bot.process.status import DaemonStatus
    from bot.recall.index import SearchIndex
    from bot.recall.visibility import Owners
    from bot.tools.mcp import McpHost
    from bot.tools.messages import ChatMessenger
    from bot.web.server import WebServer


@dataclass(frozen=True, slots=True)
class Shared:
    """What every agent's tools use of the daemon, made once."""

    outbox: Outbox
    telemetry: Telemetry
    media: ChatMedia
    cron: JobBook
    mcp: McpHost
    messenger: ChatMessenger
    announcer: LaneAnnouncer
    browser: BrowserPool | None  # agent.browser, started on first use
    main_id: str  # the `agent:` section's id
    several: bool = False  # more than one agent is configured


@dataclass(frozen=True, slots=True)
class Brain:
    """What an agent's turns think with: the model client, the agent loop, the skills and its
    view of the search index (and whose DMs see the memory files)."""

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
    """An agent's tools (the base tools and `spawn`), the prompt that lists them, its
    sub-agents."""

    subagents: SubagentRunner
    tools: ToolRegistry
    prompts: PromptBuilder


@dataclass(frozen=True, slots=True)
class AgentParts:
    """One agent's parts: its brain and belt, its model choices, upkeep and turns."""

    agent_id: str
    brain: Brain
    belt: Belt
    models: ModelChoices
    upkeep: SessionUpkeep
    runner: TurnRunner
    window: int  # its model's context window

    @property
    def index(self) -> SearchIndex:
        return self.brain.index

    async def aclose(self) -> None:
        """Close what this agent holds of its own (sub-agents, upkeep, client, index)."""
        await self.belt.subagents.aclose()
        await self.upkeep.stop()
        await self.brain.aclose()


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """The smaller build `perch chat` runs one turn on when no daemon runs: no channels, so no
    `message`, `cron` or `spawn` tools; the turn is saved like any other."""

    brain: Brain
    budget: Budget
    runner: TurnRunner


@dataclass(frozen=True, slots=True)
class Parts:
    """The built daemon: what it starts, serves and stops (main's agent parts first)."""

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
    web: WebServer | None  # the dashboard, webhooks and the API, when any is on
    index: SearchIndex  # memory notes, conversations and skills, searched by recall and tools
    browser: BrowserPool | None = None  # agent.browser, when enabled
    agents: tuple[AgentParts, ...] = ()  # the further agents (`agents:`); main's are above
    approvals: ApprovalBroker | None = (
        None  # asks before risky tools; started to deny what a restart left
    )
