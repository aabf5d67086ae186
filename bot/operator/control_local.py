"""`perch chat` when no daemon runs: one turn in this process, reply on stdout.

It takes the database's instance lock (so a daemon cannot start under it, and a daemon whose
socket does not answer is reported instead of written over), takes the part of the daemon's
object graph a turn needs from `bot/build.py` (`build_chat`: the brain and the workspace
tools, no channels, so no `message`, `cron` or `spawn`), runs the turn in the given session
and saves it like any other. This is the one control path that needs the model key.
"""

from __future__ import annotations

import uuid

from bot.build_lite import build_chat
from bot.config.errors import ConfigError
from bot.config.layout import layout_problem
from bot.config.load import require_api_key
from bot.config.paths import socket_path
from bot.config.schema import Config
from bot.kernel.lanes import Pending, Turn
from bot.kernel.sessions import SessionKey
from bot.kernel.workspace import seed_workspace
from bot.operator.ops_agents import agent_problem, chat_session
from bot.operator.ops_chat import default_chat_key, turn_reply
from bot.operator.reply import Reply
from bot.parts import ChatTurn
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import AlreadyRunning
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
    main = key.agent == config.agent.id
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
    return await _run(config, store, key, text, main)


async def _run(config: Config, store: Store, key: SessionKey, text: str, main: bool) -> Reply:
    problem = layout_problem(config)  # the same refusal as perch run: tools run here too
    if problem is not None:
        await store.close()
        return Reply(78, err=f"perch chat: {problem}\n")
    chat: ChatTurn | None = None
    try:
        seed_workspace(config.workspace)  # before the prompt and the skills read it
        chat = build_chat(config, store, main=main)  # the daemon's graph, the part a turn needs
        notice = await chat.budget.notice()
        if notice:
            return Reply(1, err=f"perch chat: {notice}\n")
        inbound = Inbound(
            chat=ChatRef("", "", "dm", str(key)),
            sender_id="owner",
            text=text,
            message_id=uuid.uuid4().hex,
        )
        outcome = await chat.runner.run(key, Turn([Pending(inbound, None)]), None)
        return turn_reply(outcome)
    finally:
        if chat is not None:
            await chat.brain.aclose()
        await store.close()
