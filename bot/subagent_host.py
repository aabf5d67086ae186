"""The daemon's side of sub-agents: child sessions in the store, results announced via lanes.

`ChildSessions` implements `agents.subagents.ChildStore`: child keys are
`SessionKey.sub(parent, spawn_id)`, a child's run is saved in its own session (its usage in
the `usage` ledger under the child's key), and its tokens and cost are added to the totals
of every ancestor session without a second ledger row, so daily totals never count a child
twice. `LaneAnnouncer` implements `Announcer`: results of detached children of one parent
that finish within `window` seconds are batched into one system message, which
`Gateway.run_system_turn(..., when_busy="queue")` runs as a parent turn (queued behind a
busy parent, where the `collect` queue mode merges later batches too) and delivers to the
parent's chat like any turn, through `bot.delivery.TurnReply` (cleaned preview and final). `build_subagents(...)` makes both for the daemon.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from agents.loop import AgentLoop, RunResult
from agents.model import Usage
from agents.prompt import PromptBuilder
from agents.subagent_ports import SubagentLimits
from agents.subagents import SubagentRunner
from bot.config.schema import Config
from bot.gateway import Gateway
from bot.routing import decode_chat
from bot.sessions import SessionKey
from bot.store.roles import History, Sessions, UsageLedger

log = logging.getLogger(__name__)


class ChildSessionStore(Sessions, History, UsageLedger, Protocol):
    """Where children's runs and their cost are kept."""


ANNOUNCE_WINDOW_S = 0.5
ANNOUNCE_HEADER = (
    "Results of sub-agents you started earlier with wait=false. Tell the user what matters "
    "in them, in your own words."
)


def subagent_limits(config: Config) -> SubagentLimits:
    sub = config.agent.subagents
    return SubagentLimits(
        max_depth=config.agent.max_spawn_depth,
        max_children_per_run=sub.max_children_per_run,
        max_concurrent=sub.max_concurrent,
        timeout_s=sub.timeout_s,
        allow=tuple(sub.tools.allow) if sub.tools.allow is not None else None,
        deny=tuple(sub.tools.deny),
    )


class ChildSessions:
    """`ChildStore` on the daemon's SQLite store."""

    def __init__(self, store: ChildSessionStore) -> None:
        self.store = store

    def child_key(self, parent_key: str, spawn_id: str) -> str:
        return str(SessionKey.sub(SessionKey.parse(parent_key), spawn_id))

    async def save_child(self, key: str, result: RunResult, *, run_id: str, origin: str) -> None:
        session = await self.store.session(key)
        await self.store.save_run(
            session.id,
            key,
            result.new_messages,
            usage=result.usage,
            run_id=run_id,
            model=result.model,
            context_tokens=result.context_tokens or None,
            origin=origin or None,
        )

    async def add_usage(self, parent_key: str, usage: Usage) -> None:
        """Add `usage` to the session totals of `parent_key` and all its ancestors."""
        keys: list[str] = []
        key: SessionKey | None = SessionKey.parse(parent_key)
        while key is not None:
            keys.append(str(key))
            key = key.parent
        for name in keys:
            await self.store.session(name)  # a root archived by /new meanwhile gets a fresh row
        await self.store.add_session_totals(keys, usage)


@dataclass(slots=True)
class _Batch:
    origin: str | None
    texts: list[str] = field(default_factory=list)


class LaneAnnouncer:
    """`Announcer` through the gateway's lanes; `bind(gateway)` once the gateway exists."""

    def __init__(self, *, window: float = ANNOUNCE_WINDOW_S) -> None:
        self.window = window
        self._gateway: Gateway | None = None
        self._batches: dict[str, _Batch] = {}
        self._waiting: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def bind(self, gateway: Gateway) -> None:
        self._gateway = gateway

    async def announce(self, parent_key: str, origin: str | None, text: str) -> None:
        batch = self._batches.get(parent_key)
        if batch is None:
            batch = self._batches[parent_key] = _Batch(origin)
            task = asyncio.create_task(self._flush(parent_key), name=f"announce {parent_key}")
            self._waiting[parent_key] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        batch.texts.append(text)

    async def _flush(self, parent_key: str) -> None:
        await asyncio.sleep(self.window)  # results finishing together go in one turn
        self._waiting.pop(parent_key, None)
        batch = self._batches.pop(parent_key)
        gateway = self._gateway
        if gateway is None or not gateway.accepting:
            log.warning(
                "%d sub-agent result(s) for %s not announced: the daemon is stopping",
                len(batch.texts),
                parent_key,
            )
            return
        text = "\n\n".join([ANNOUNCE_HEADER, *batch.texts])
        chat = decode_chat(batch.origin or "")
        log.info(
            "announcing %d sub-agent result(s) into %s%s",
            len(batch.texts),
            parent_key,
            "" if chat is not None else " (no chat to deliver to)",
        )
        await gateway.run_system_turn(
            SessionKey.parse(parent_key), text, chat=chat, when_busy="queue"
        )

    async def aclose(self, timeout: float = 5.0) -> None:
        """Shutdown: drop results still in their batching window, let started turns end."""
        for task in self._waiting.values():
            task.cancel()
        if self._batches:
            log.warning(
                "sub-agent results for %s not announced: the daemon is stopping",
                ", ".join(self._batches),
            )
        self._waiting.clear()
        self._batches.clear()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)


def build_subagents(
    config: Config, store: ChildSessionStore, loop: AgentLoop, prompts: PromptBuilder
) -> tuple[SubagentRunner, LaneAnnouncer]:
    """The daemon's sub-agent runner and its announcer (bind the gateway to it later)."""
    announcer = LaneAnnouncer()
    runner = SubagentRunner(
        loop,
        prompts,
        ChildSessions(store),
        announcer,
        agent_id=config.agent.id,
        limits=subagent_limits(config),
        timezone=config.agent.timezone,
        model=config.agent.subagents.model,
    )
    return runner, announcer
