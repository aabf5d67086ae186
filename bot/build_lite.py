"""The smaller builds: part of the daemon's graph for commands that run without a daemon.

`build_chat` is `perch chat` without a daemon: the agent's brain and workspace tools, no
channels, with a `TurnRunner` made by `bot/build.py`'s `turn_runner` (the one place one is
made). `build_prompt` is `perch doctor`'s prompt measure: the brain and the tool belt without
channels (MCP servers are not started, so their tools are not counted).
"""

from __future__ import annotations

from bot.build import build_belt, build_brain, build_shared, prompt_builder, turn_runner
from bot.config.schema import Config
from bot.kernel.budget import Budget
from bot.kernel.ports import Outbox
from bot.observe.telemetry import OFF
from bot.parts import Belt, Brain, ChatTurn
from bot.store.roles import Store
from bot.tools.belt import build_tools


def build_chat(config: Config, store: Store, *, main: bool = True) -> ChatTurn:
    """`perch chat` without a daemon: the agent's brain and workspace tools, no channels
    (`main`: the agent is `agent:`, not one of `agents:`)."""
    brain = build_brain(config, store, {}, main=main, several=bool(config.agents))
    tools = build_tools(config, skills=brain.skills, index=brain.index)
    runner = turn_runner(config, store, brain, prompt_builder(config, brain, tools), tools, {})
    return ChatTurn(brain, Budget(config.agent.budget, store), runner)


def build_prompt(config: Config, store: Store) -> tuple[Brain, Belt]:
    """`perch doctor`'s prompt measure: the daemon's brain and tool belt without channels
    (MCP servers are not started, so their tools are not counted)."""
    brain = build_brain(config, store, {})
    return brain, build_belt(config, store, brain, build_shared(config, store, Outbox({}), OFF))
