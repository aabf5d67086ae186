"""`--agent ID` on `perch chat|send|sessions|cron|usage`: the id checked against the config.

`agent_problem` is None for an id the config defines (`agent:`'s, or one of `agents:`), else
the one line the command prints; `chat_session` is the session `perch chat --agent ID` uses
without `--session` (that agent's `cli` DM).
"""

from __future__ import annotations

from bot.config.schema import Config
from bot.kernel.sessions import SessionKey
from channels.base import ChatRef

CLI_CHAT = ChatRef("cli", "local", "dm", "owner")  # `perch chat` without --session


def agent_problem(config: Config, agent: object, command: str) -> str | None:
    """Why `agent` is not usable with `command`, or None (also for no --agent)."""
    if not agent:
        return None
    known = config.agent_ids()
    if str(agent) in known:
        return None
    return f"perch {command}: --agent {agent}: no such agent (agents: {', '.join(known)})\n"


def chat_session(agent: str) -> SessionKey:
    return SessionKey.for_chat(agent, CLI_CHAT)
