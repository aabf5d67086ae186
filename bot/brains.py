"""One agent's brain, built from its view of the config: what `bot/build.py` makes per agent.

`build_brain(config, store, shared)` makes, for the agent `config.agent` describes (the main
one, or `config.for_agent(id)` for another): its model router (its model and fallbacks), its
loop, its skills (bundled, `skills.paths` and its own workspace's), its search index (seen
through `AgentSearch`, so it finds nothing of another agent), its tools (the file and memory
tools work in its workspace), its prompts (its persona files), sub-agents, compaction and
its `TurnRunner`. What all agents share comes in `Shared`: the telemetry, the chats' media,
the cron book (each agent's `cron` tool sees only its own jobs), the MCP servers, the `message` tool's messenger, the announcer of sub-agent
results and the budget. The main agent's runner is given the others' (`agents`): a turn of a
session whose key names another agent runs there.
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
from agents.skills.catalog import SkillCatalog
from agents.subagents import SubagentRunner
from agents.tools.base import ToolRegistry
from agents.tools.cron import CronTool
from agents.tools.message import MessageTool
from bot.budget import Budget
from bot.config.providers import build_router
from bot.config.schema import Config
from bot.cron.book import JobBook
from bot.fleet.cron_scope import AgentJobBook
from bot.fleet.search_scope import AgentSearch
from bot.media.chat import ChatMedia
from bot.model_choice import ModelChoices
from bot.observe.telemetry import Telemetry
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.store.roles import Store
from bot.subagent_host import ChildSessions, LaneAnnouncer, subagent_limits
from bot.tools.belt import build_tools
from bot.tools.mcp import McpHost
from bot.tools.messages import ChatMessenger
from bot.tools.skills import skill_catalog
from bot.turns import TurnRunner
from bot.upkeep import SessionUpkeep
from channels.base import Channel

# What the memory flush before a compaction may use.
FLUSH_TOOLS = ["memory_append", "write_file", "read_file"]


@dataclass(frozen=True, slots=True)
class Shared:
    """What every agent's brain uses of the daemon."""

    channels: Mapping[str, Channel]
    telemetry: Telemetry
    media: ChatMedia
    cron: JobBook
    mcp: McpHost
    messenger: ChatMessenger
    announcer: LaneAnnouncer
    budget: Budget
    owners: Mapping[str, tuple[str, ...]]
    main_id: str  # the `agent:` section's id
    clock: Callable[[], float] = time.time
    several: bool = False  # more than one agent is configured


@dataclass(frozen=True, slots=True)
class Brain:
    """One agent's parts."""

    agent_id: str
    client: ModelRouter
    skills: SkillCatalog
    index: SearchIndex
    models: ModelChoices
    tools: ToolRegistry
    subagents: SubagentRunner
    upkeep: SessionUpkeep
    runner: TurnRunner

    async def aclose(self) -> None:
        """Close what this brain holds of its own (sub-agents, upkeep, client, index)."""
        for close in (self.subagents.aclose, self.upkeep.stop, self.client.aclose):
            await close()
        await self.index.aclose()


def build_brain(
    config: Config,
    store: Store,
    shared: Shared,
    *,
    main: bool = True,
    agents: Mapping[str, TurnRunner] | None = None,
) -> Brain:
    """The brain of the agent `config.agent` describes (see the module's docstring)."""
    agent = config.agent
    telemetry, clock = shared.telemetry, shared.clock
    client = build_router(config, telemetry.observer)
    loop = AgentLoop(
        client,
        agent.model,
        max_iterations=agent.max_iterations,
        max_tokens=agent.max_tokens,
        max_tool_result_chars=agent.max_tool_result_chars,
        observer=telemetry.observer,
    )
    skills = skill_catalog(config)  # read by the prompt, read_skill and exec alike
    searched = AgentSearch(store, agent.id, main=main, alone=not shared.several)
    index = SearchIndex.from_config(config, searched, skills, dict(shared.owners), clock=clock)
    models = ModelChoices(store, config)
    gate = shared.budget.notice if shared.budget.enabled else None
    media = shared.media
    base_tools = build_tools(
        config,
        [
            MessageTool(shared.messenger),
            CronTool(AgentJobBook(shared.cron, agent.id, shared.main_id)),
            *media.tools(),
        ],
        shared.mcp.providers(),
        skills,
        index,
    )
    # The skills are listed in the prompt only where read_skill is on the belt (agent.tools).
    prompts = PromptBuilder(
        config.workspace, skills=skills if "read_skill" in base_tools else None, clock=clock
    )
    subagents = SubagentRunner(
        loop,
        prompts,
        ChildSessions(store, index),
        shared.announcer,
        tools=base_tools,
        agent_id=agent.id,
        limits=subagent_limits(config),
        timezone=agent.timezone,
        model=agent.subagents.model,
        gate=gate,
    )
    tools = subagents.tools  # the base tools and `spawn`

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
    budget = shared.budget
    runner = TurnRunner(
        config,
        store,
        loop,
        prompts,
        tools,
        shared.channels,
        media=media,
        models=models,
        after_run=[upkeep.after_run, *([budget.after_run] if budget.enabled else [])],
        telemetry=telemetry,
        cache=cache,
        recall=TurnRecall(agent.recall, index, shared.owners, agent.timezone, skills),
        index=index,
        agents=agents,
    )
    return Brain(agent.id, client, skills, index, models, tools, subagents, upkeep, runner)
