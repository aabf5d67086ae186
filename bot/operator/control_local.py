"""`perch chat` when no daemon runs: one turn in this process, reply on stdout.

It takes the database's instance lock (so a daemon cannot start under it, and a daemon whose
socket does not answer is reported instead of written over), builds the agent loop with the
workspace tools (no channels, so no `message`, `cron` or `spawn`), runs the turn in the given
session and saves it like any other. This is the one control path that needs the model key.
"""

from __future__ import annotations

import uuid

from agents.loop import AgentLoop
from agents.prompt import PromptBuilder
from bot.budget import Budget
from bot.config.errors import ConfigError
from bot.config.layout import layout_problem
from bot.config.load import require_api_key
from bot.config.paths import socket_path
from bot.config.providers import build_router
from bot.config.schema import Config
from bot.lanes import Pending, Turn
from bot.operator.ops_agents import agent_problem, chat_session
from bot.operator.ops_chat import default_chat_key, turn_reply
from bot.operator.reply import Reply
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.sessions import SessionKey
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import AlreadyRunning
from bot.tools.belt import build_tools
from bot.tools.skills import skill_catalog
from bot.turns import TurnRunner
from bot.workspace import seed_workspace
from channels.base import ChatRef, Inbound


async def chat_standalone(
    config: Config, text: str, session: object, agent: object = None
) -> Reply:
    problem = agent_problem(config, agent, "chat")
    if problem:
        return Reply(2, err=problem)
    try:
        if session:
            key = SessionKey.parse(str(session))
        else:
            key = chat_session(str(agent)) if agent else default_chat_key(config)
    except ValueError as exc:
        return Reply(2, err=f"perch chat: --session: {exc}\n")
    try:
        config = config.for_agent(key.agent)  # its model, workspace, tools and persona
    except KeyError:
        return Reply(2, err=f"perch chat: no agent {key.agent!r} in the config\n")
    unset = [u for u in config.unresolved if u.startswith("providers.")]
    if unset:
        return Reply(
            78,
            err=f"perch chat: Perch is not running, so the model is called from here, and "
            f"{unset[0]} (or start the daemon)\n",
        )
    try:
        require_api_key(config)
    except ConfigError as exc:
        return Reply(78, err=f"perch chat: {exc}\n")
    store = await open_store(config.store_target)
    try:
        await store.hold_instance()
    except AlreadyRunning:
        await store.close()
        return Reply(
            1,
            err="perch chat: a Perch daemon holds the database but its control socket "
            f"{socket_path(config)} does not answer; check its log\n",
        )
    return await _run(config, store, key, text)


async def _run(config: Config, store: Store, key: SessionKey, text: str) -> Reply:
    problem = layout_problem(config)  # the same refusal as perch run: tools run here too
    if problem is not None:
        return Reply(78, err=f"perch chat: {problem}\n")
    client = build_router(config)  # the daemon's provider routing, same models
    index: SearchIndex | None = None
    try:
        notice = await Budget(config.agent.budget, store).notice()
        if notice:
            return Reply(1, err=f"perch chat: {notice}\n")
        seed_workspace(config.workspace)
        loop = AgentLoop(
            client,
            config.agent.model,
            max_iterations=config.agent.max_iterations,
            max_tokens=config.agent.max_tokens,
            max_tool_result_chars=config.agent.max_tool_result_chars,
        )
        skills = skill_catalog(config)
        index = SearchIndex.from_config(config, store, skills)
        tools = build_tools(config, skills=skills, index=index)
        listed = skills if "read_skill" in tools else None  # as the daemon does (bot/build.py)
        prompts = PromptBuilder(config.workspace, skills=listed)
        recall = TurnRecall(config.agent.recall, index, {}, config.agent.timezone, skills)
        runner = TurnRunner(config, store, loop, prompts, tools, {}, recall=recall, index=index)
        inbound = Inbound(
            chat=ChatRef("", "", "dm", str(key)),
            sender_id="owner",
            text=text,
            message_id=uuid.uuid4().hex,
        )
        outcome = await runner.run(key, Turn([Pending(inbound, None)]), None)
        return turn_reply(outcome)
    finally:
        await client.aclose()
        if index is not None:
            await index.aclose()
        await store.close()
