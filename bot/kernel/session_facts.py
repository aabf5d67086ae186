"""The session facts a prompt carries: which agent, session, model, time zone and chat kind.

`runtime_info` makes the `agents.prompt.RuntimeInfo` of a session for a turn, for compaction
(which must start from the same prompt to read the chat's cache) and for `perch doctor`'s
measure of the prompt, so all three describe a session the same way.
"""

from __future__ import annotations

from agents.prompt import RuntimeInfo
from bot.config.schema import Config
from bot.kernel.sessions import SessionKey
from channels import registry


def runtime_info(config: Config, key: SessionKey, channel: str | None, model: str) -> RuntimeInfo:
    """The session facts of the prompt for `key`, talking through `channel` (if any)."""
    return RuntimeInfo(
        agent_id=config.agent.id,
        session_key=str(key),
        model=model,
        timezone=config.agent.timezone,
        chat_hint=registry.capabilities(channel).chat_hint if channel else "",
    )
