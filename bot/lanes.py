"""Per-session lanes: how many turns of one session run at once, and what waits.

A `Lane` holds a session's active `Turn`s (oldest first) and its queue of `Pending`
messages. A DM lane runs one turn at a time; a group lane up to `group_max_concurrent`
(3), dropping to 1 while the session's context is over 60% full. What happens to a
message that finds its lane busy is the queue mode's business (DESIGN section 3, step 4),
decided by `Lane.admit`; `Lane.next_batches` says which queued messages start next. The
lane is plain data and rules: the gateway owns tasks and I/O.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from agents.cancel import CancelToken
from agents.loop import SteerInbox
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

    @property
    def inbox_ids(self) -> list[int]:
        return [p.inbox_id for p in (*self.items, *self.steered) if p.inbox_id is not None]


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
