"""What the chat commands do to a session's lane: `/stop`, `/stopall`, `/status`, `/compact`.

`LaneControls` is the part of the `Gateway` that commands (`Commands`, as its
`SessionControl`), the cluster's stop listener, the API and the wings' busy checks call:
stop the oldest running turn or every one (their sub-agents with them) and drop the queue,
say how many run and wait, compact now, and whether a session is busy. A base class of
`Gateway`, which holds the lanes it reads and the callbacks it uses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from bot.hub.commands import LaneInfo
from bot.kernel.lanes import LaneTable, Pending
from bot.kernel.sessions import SessionKey

Compactor = Callable[[SessionKey], Awaitable[str]]


class LaneControls(ABC):
    """Stop, inspect and compact a session's lane (see the module's docstring)."""

    lanes: LaneTable
    compactor: Compactor | None
    cancel_children: Callable[[str], int]  # a session's sub-agents outliving their turn

    @abstractmethod
    def _spawn(self, coro: Coroutine[Any, Any, object], name: str | None = None) -> None:
        """Run `coro` as one of the gateway's background tasks."""

    @abstractmethod
    async def _release(self, items: Iterable[Pending], status: str) -> None:
        """Close the inbox rows of messages that will not run (here: dropped by /stopall)."""

    def stop_oldest(self, key: SessionKey) -> bool:
        """Cancel the oldest running turn (its sub-agents with it); with none running,
        the session's background sub-agents."""
        lane = self.lanes.get(str(key))
        turn = lane.oldest_running() if lane else None
        if turn is None:
            return self.cancel_children(str(key)) > 0
        turn.cancel.cancel()
        return True

    def stop_all(self, key: SessionKey) -> tuple[int, int]:
        """Cancel every turn and background sub-agent of the session and drop its queue;
        returns (runs stopped, waiting messages dropped)."""
        runs = 0
        lane = self.lanes.get(str(key))
        for turn in lane.active if lane else ():
            if not turn.cancel.cancelled:
                turn.cancel.cancel()  # cascades to the sub-agents it waits for
                runs += 1
        runs += self.cancel_children(str(key))  # children whose turn already ended
        if lane is None:
            return runs, 0
        dropped = lane.drain()
        if dropped:
            self._spawn(self._release(dropped, "skipped"))
        return runs, len(dropped)

    def lane_info(self, key: SessionKey) -> LaneInfo:
        lane = self.lanes.get(str(key))
        return LaneInfo(len(lane.active), len(lane.queue)) if lane else LaneInfo(0, 0)

    async def compact_now(self, key: SessionKey) -> str:
        if self.compactor is None:
            return "Compaction is not available."
        return await self.compactor(key)

    def is_busy(self, key: SessionKey) -> bool:
        return self.lanes.busy(str(key))
