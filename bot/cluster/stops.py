"""`/stop` and `/stopall` for runs on other instances sharing the store (PostgreSQL).

A command is answered by whichever instance received it; the run it means may be on
another one (a DM's run goes wherever its message landed). `StopRequests.stop` puts a stop
request in the store's `stops` table when this instance has nothing to stop itself
(`/stop`) or always (`/stopall`, `/new`, `/reset`: runs and waiting messages of the session
may be anywhere); every other instance's `StopListener` polls the table every `POLL` seconds
and applies the request to its own lanes. The answer counts the other instances that hold one of the
session's run slots right now (`bot/cluster/slots.py`). On a store that is not shared this is
never used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from bot.kernel.sessions import SessionKey
from bot.store.roles import Claims, Lifecycle, Stops

log = logging.getLogger(__name__)


class StopStore(Lifecycle, Stops, Claims, Protocol):
    """Stop requests across instances and who holds a session."""


POLL = 0.5  # seconds between looks at the stop requests of other instances


class StopRequests:
    """This instance's `/stop` for runs elsewhere (the chat commands' `RemoteControl`)."""

    def __init__(self, store: StopStore) -> None:
        self.store = store

    async def stop(self, key: str, *, everything: bool) -> int:
        """Ask the other instances; returns how many run this session right now."""
        holders = await self.store.claim_holders(f"session:{key}")
        await self.store.stop_publish(key, everything)
        return len(holders)


class StopListener:
    """Applies the other instances' stop requests to this instance's lanes."""

    def __init__(
        self,
        store: StopStore,
        stop_oldest: Callable[[SessionKey], bool],
        stop_all: Callable[[SessionKey], tuple[int, int]],
    ) -> None:
        self.store = store
        self._stop_oldest = stop_oldest
        self._stop_all = stop_all
        self._after: int | None = None

    async def poll(self) -> int:
        """Apply the requests made since the last poll; returns how many runs stopped."""
        self._after, requests = await self.store.stops_after(self._after)
        stopped = 0
        for text, everything in requests:
            try:
                key = SessionKey.parse(text)
            except ValueError:
                continue
            if everything:
                stopped += self._stop_all(key)[0]
            elif self._stop_oldest(key):
                stopped += 1
        if stopped:
            log.info("stopped %d run(s) at another instance's request", stopped)
        return stopped

    async def poll_forever(self) -> None:
        await self.poll()  # the starting point: requests from before are not ours
        while True:
            await asyncio.sleep(POLL)
            try:
                await self.poll()
            except Exception as exc:
                log.warning("could not read stop requests from %s: %s", self.store.location, exc)
