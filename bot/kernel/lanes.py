"""Per-session lanes: how many turns of one session run at once, and what waits.

A `Lane` holds a session's active `Turn`s (oldest first) and its queue of `Pending`
messages. A DM lane runs one turn at a time; a group lane up to `group_max_concurrent`
(3), dropping to 1 while the session's context is over 60% full. What happens to a
message that finds its lane busy is the queue mode's business (DESIGN section 3, step 4),
decided by `Lane.admit`; `Lane.next_batches` says which queued messages start next. The
lane is plain data and rules: the gateway owns tasks and I/O.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.cancel import CancelToken
from agents.loop import SteerInbox
from agents.loop_events import EventSink
from agents.model import text_block
from channels.base import ChatRef, Inbound

QueueMode = Literal["collect", "followup", "interrupt", "steer"]
CONTEXT_CROWDED = 0.6


@dataclass(slots=True)
class Pending:
    """An accepted message waiting for (or merged into) a turn."""

    inbound: Inbound
    inbox_id: int | None
    context: str = ""  # recent unmentioned group messages to show with it
    system: bool = False  # from the daemon itself (scheduler, sub-agent results), not a user

    @property
    def reply_chat(self) -> ChatRef | None:
        """Where the answer goes; None for system turns whose caller delivers."""
        chat = self.inbound.chat
        return chat if chat.channel else None


@dataclass(slots=True)
class Turn:
    items: list[Pending]
    cancel: CancelToken = field(default_factory=CancelToken)
    steer: SteerInbox = field(default_factory=SteerInbox)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    steered: list[Pending] = field(default_factory=list)
    # Hands back the daemon-wide run slot (`max_concurrent_runs`) once the agent loop is
    # done, so saving and delivering the answer never keep the next turn from its model
    # call. Set by the gateway; calling it twice is harmless.
    release_slot: Callable[[], None] = field(default=lambda: None)
    # Closes the turn's inbox rows the moment its reply is out (`bot.hub.turns`), before the
    # work that follows it (indexing, compaction), so an instance that dies after answering
    # leaves nothing for another to answer again. Set by the gateway.
    answered: Callable[[], Awaitable[None]] = field(default=lambda: _nothing())
    # Told of the run's progress when no chat is (the OpenAI-compatible API's stream).
    watch: EventSink | None = None
    # Gives the run slot back while the turn waits for a person (an approval) and takes it
    # again after (`take_run_slot` sets it); None until the gateway gave the turn a slot.
    pause: Callable[[], AbstractAsyncContextManager[None]] | None = None

    def steer_with(self, text: str) -> None:
        """Hand a message that came in while it runs to the turn's next model call."""
        self.steer.put([text_block(f"[New message while you work]: {text}")])


async def _nothing() -> None:
    return None


def once(release: Callable[[], None]) -> Callable[[], None]:
    """`release`, callable any number of times but run only the first."""
    done = False

    def call() -> None:
        nonlocal done
        if not done:
            done = True
            release()

    return call


async def take_run_slot(turn: Turn, slots: asyncio.Semaphore) -> None:
    """Wait (cancellably) for a place in `slots`; `turn.release_slot` gives it back, once,
    and `turn.pause` lends it out while the turn waits for a person."""
    if slots.locked():
        await turn.cancel.race(slots.acquire())
    else:  # free: taken at once (racing the stop would cost the turn two tasks' steps)
        turn.cancel.check()
        await slots.acquire()
    turn.release_slot = once(slots.release)
    turn.pause = lambda: _lend_slot(turn, slots)


@asynccontextmanager
async def _lend_slot(turn: Turn, slots: asyncio.Semaphore) -> AsyncIterator[None]:
    turn.release_slot()
    yield  # an error or a stop while waiting: the turn ends holding no slot
    await take_run_slot(turn, slots)  # Cancelled if the turn is stopped meanwhile


@dataclass(frozen=True, slots=True)
class Admission:
    """What to do with a message for this lane."""

    start: bool  # start a turn with it now
    steer_into: Turn | None = None  # inject into this running turn
    interrupt: tuple[Turn, ...] = ()  # cancel these first
    dropped: tuple[Pending, ...] = ()  # pushed out of a full queue (oldest first)


class Lane:
    def __init__(self, key: str, *, is_group: bool, group_limit: int, cap: int) -> None:
        self.key = key
        self.is_group = is_group
        self.group_limit = group_limit
        self.cap = cap
        self.active: list[Turn] = []
        self.queue: deque[Pending] = deque()
        self.context_ratio = 0.0
        self.drop_noticed = False  # the chat was told this busy spell that messages dropped

    @property
    def limit(self) -> int:
        if not self.is_group or self.context_ratio > CONTEXT_CROWDED:
            return 1
        return self.group_limit

    @property
    def has_room(self) -> bool:
        return len(self.active) < self.limit

    @property
    def idle(self) -> bool:
        return not self.active and not self.queue

    def admit(self, pending: Pending, mode: QueueMode) -> Admission:
        if self.has_room and not self.queue:
            return Admission(start=True)
        if mode == "steer":
            target = next((t for t in reversed(self.active) if not t.cancel.cancelled), None)
            if target is not None:
                return Admission(start=False, steer_into=target)
        if mode == "interrupt":
            doomed = tuple(t for t in self.active if not t.cancel.cancelled)
            dropped = tuple(self.queue)
            self.queue.clear()
            self.queue.append(pending)
            return Admission(start=False, interrupt=doomed, dropped=dropped)
        self.queue.append(pending)
        dropped_list: list[Pending] = []
        while len(self.queue) > self.cap:
            dropped_list.append(self.queue.popleft())
        return Admission(start=False, dropped=tuple(dropped_list))

    def next_batches(self, mode: QueueMode) -> list[list[Pending]]:
        """Queued messages to start now, as batches (one turn each), while there is room."""
        batches: list[list[Pending]] = []
        room = self.limit - len(self.active)
        while room > 0 and self.queue:
            if mode == "collect":
                batch = list(self.queue)
                self.queue.clear()
            else:
                batch = [self.queue.popleft()]
            batches.append(batch)
            room -= 1
        if not self.queue:
            self.drop_noticed = False
        return batches

    def oldest_running(self) -> Turn | None:
        return next((t for t in self.active if not t.cancel.cancelled), None)

    def drain(self) -> list[Pending]:
        items = list(self.queue)
        self.queue.clear()
        return items


class LaneTable(dict[str, Lane]):
    """The lanes of the sessions that have work, by session key. A lane is made when a
    message arrives and forgotten once idle; what it must outlive (how full a group's
    context is) is kept here."""

    def __init__(self, *, group_limit: int, cap: int) -> None:
        super().__init__()
        self.group_limit = group_limit
        self.cap = cap
        self._context_ratio: dict[str, float] = {}  # group session -> context share

    def open(self, key: str, *, is_group: bool) -> Lane:
        lane = self.get(key)
        if lane is None:
            lane = Lane(key, is_group=is_group, group_limit=self.group_limit, cap=self.cap)
            lane.context_ratio = self._context_ratio.get(key, 0.0)
            self[key] = lane
        return lane

    def forget_if_idle(self, lane: Lane) -> None:
        if lane.idle:
            self.pop(lane.key, None)

    def note_context(self, key: str, ratio: float) -> None:
        """How full the session's context is: over 60% a group's turns run one at a time."""
        lane = self.get(key)
        if lane is not None:
            lane.context_ratio = ratio
            if lane.is_group:
                self._context_ratio[key] = ratio

    def busy(self, key: str) -> bool:
        lane = self.get(key)
        return lane is not None and not lane.idle

    def any_active(self) -> bool:
        return any(lane.active for lane in self.values())

    def status(self) -> dict[str, Any]:
        return {
            "active_runs": sum(len(lane.active) for lane in self.values()),
            "queued": sum(len(lane.queue) for lane in self.values()),
            "lanes": {
                key: {"active": len(lane.active), "queued": len(lane.queue)}
                for key, lane in self.items()
            },
        }
