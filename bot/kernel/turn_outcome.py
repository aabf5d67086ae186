"""What a finished turn hands back: `TurnOutcome` and the session as it is after it.

The hub's `TurnRunner` makes these; the gateway, the upkeep and budget listeners, cron and the
operator's `perch chat` read them. They live below the hub so that a wing reads a turn's
outcome without importing the hub. `empty_answer` says whether a run ended with nothing a
user could see (neither a chosen NO_REPLY nor an answer through a tool).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.loop import RunResult
from agents.prompt import PromptMode, RuntimeInfo
from agents.sanitize import sanitize_output


@dataclass(frozen=True, slots=True)
class SessionState:
    """What a finished turn knows of its session, without asking the database again."""

    key: str
    messages: int  # stored after this turn (a concurrent run's own are not counted)
    context_tokens: int  # the last model call's prompt (an estimate if no call finished)
    cost_usd: float = 0.0  # what the turn's model calls cost
    mode: PromptMode = "full"  # the prompt the turn ran with ...
    runtime: RuntimeInfo | None = None  # ... and its session facts (compaction reuses them)


@dataclass(slots=True)
class TurnOutcome:
    result: RunResult | None
    delivered: bool
    blocked: bool = False
    session: SessionState | None = None  # after a model run: the session as it is now


def empty_answer(result: RunResult) -> bool:
    """The run ended normally with nothing a user could see (no text, or only reasoning or
    markup the sanitizer removes) and never called a tool. Not NO_REPLY, a chosen silence; a
    run that used tools may have answered through them (the `message` tool) or done its job."""
    if result.status != "ok" or sanitize_output(result.text).strip():
        return False
    blocks = (b for m in result.new_messages if m["role"] == "assistant" for b in m["content"])
    return not any(b.get("type") == "tool_use" for b in blocks)
