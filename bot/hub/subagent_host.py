"""The daemon's side of sub-agents: child sessions in the store, results announced via lanes.

`ChildSessions` implements `agents.subagents.ChildStore`: child keys are
`SessionKey.sub(parent, spawn_id)`, a child's run is saved in its own session (its usage in
the `usage` ledger under the child's key), and its tokens and cost are added to the totals
of every ancestor session without a second ledger row, so daily totals never count a child
twice. `LaneAnnouncer` implements `Announcer`: results of detached children of one parent
that finish within `window` seconds are batched into one system message, an `Announcement`
the gateway takes (`next()`) and runs as a parent turn (queued behind a busy parent, where
the `collect` queue mode merges later batches too), delivered to the parent's chat like any
turn. The announcer never calls the gateway: it exists before the gateway does (the runner
that needs it gives the main agent its `spawn` tool).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Protocol

from agents.loop import RunResult
from agents.model import Usage
from agents.subagent_ports import SubagentLimits
from bot.config.schema import Config
from bot.kernel.routing import decode_chat
from bot.kernel.sessions import SessionKey
from bot.recall.index import SearchIndex
from bot.store.roles import History, Sessions, UsageLedger
from channels.base import ChatRef

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

    def __init__(self, store: ChildSessionStore, index: SearchIndex | None = None) -> None:
        self.store = store
        self.index = index  # the search index, told of each saved run

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
        if self.index is not None:
            await self.index.index_run(SessionKey.parse(key), session.id, result.new_messages)

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


@dataclass(frozen=True, slots=True)
class Announcement:
    """Sub-agent results to run as one turn of their parent session (delivered to `chat`)."""

    parent: SessionKey
    chat: ChatRef | None
    text: str


class Announcements(Protocol):
    """Sub-agent results waiting to run as a parent turn (what the gateway takes)."""

    async def next(self) -> Announcement: ...


class LaneAnnouncer:
    """`Announcer` whose batches wait in a queue for the gateway (`next()`)."""

    def __init__(self, *, window: float = ANNOUNCE_WINDOW_S) -> None:
        self.window = window
        self._batches: dict[str, _Batch] = {}
        self._waiting: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready: asyncio.Queue[Announcement] = asyncio.Queue()

    async def announce(self, parent_key: str, origin: str | None, text: str) -> None:
        batch = self._batches.get(parent_key)
        if batch is None:
            batch = self._batches[parent_key] = _Batch(origin)
            task = asyncio.create_task(self._flush(parent_key), name=f"announce {parent_key}")
            self._waiting[parent_key] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        batch.texts.append(text)

    async def next(self) -> Announcement:
        """The next batch due to run as a parent turn (waits for one)."""
        return await self._ready.get()

    async def _flush(self, parent_key: str) -> None:
        await asyncio.sleep(self.window)  # results finishing together go in one turn
        self._waiting.pop(parent_key, None)
        batch = self._batches.pop(parent_key)
        text = "\n\n".join([ANNOUNCE_HEADER, *batch.texts])
        chat = decode_chat(batch.origin or "")
        where = "" if chat is not None else " (no chat to deliver to)"
        log.info("announcing %d sub-agent result(s) into %s%s", len(batch.texts), parent_key, where)
        self._ready.put_nowait(Announcement(SessionKey.parse(parent_key), chat, text))

    async def aclose(self, timeout: float = 5.0) -> None:
        """Shutdown: drop results still in their batching window or not yet taken."""
        for task in self._waiting.values():
            task.cancel()
        dropped = [*self._batches]
        while not self._ready.empty():
            dropped.append(str(self._ready.get_nowait().parent))
        if dropped:
            log.warning(
                "sub-agent results for %s not announced: the daemon is stopping",
                ", ".join(dropped),
            )
        self._waiting.clear()
        self._batches.clear()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
