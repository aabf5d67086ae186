"""What several instances on one shared store (PostgreSQL) agree on through `Store.claim`.

- Session slots: a turn takes one of its session's slots (`session:<key>`, slot 0 for a
  DM, 0..limit-1 in a group) before it runs and frees it after, so a DM runs one turn at a
  time and a group at most `group_max_concurrent` across every instance, whichever one
  received the message. Waiting for a slot is cancellable (`/stop`). A store that is not
  shared (SQLite, one daemon) needs none of this: the lanes in memory are the whole truth.
- Cron slots (`cron:<job id>` at its due time) and heartbeat ticks (`heartbeat` at the
  tick's interval boundary) are taken by the scheduler so each fires once (bot/cron/scheduler.py).
- A claim is leased to its instance and renewed by the instance beat; the claims of an
  instance that died run out after `store.lease` seconds and the others go on.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agents.cancel import CancelToken
from bot.store.roles import Claims

log = logging.getLogger(__name__)

SLOT_POLL = 0.2  # seconds between tries for a session slot another instance holds


@dataclass(frozen=True, slots=True)
class Held:
    name: str
    slot: float


class SessionSlots:
    """Cross-instance session slots (see the module docstring)."""

    def __init__(self, store: Claims) -> None:
        self.store = store

    async def take(self, key: str, limit: int, cancel: CancelToken) -> Held | None:
        """Wait for a free slot of session `key`; None when the store is not shared.
        Raises `Cancelled` if `cancel` fires while waiting."""
        if not self.store.shared:
            return None
        name = f"session:{key}"
        while True:
            cancel.check()
            for slot in range(max(limit, 1)):
                if await self.store.claim(name, float(slot)):
                    return Held(name, float(slot))
            await cancel.race(asyncio.sleep(SLOT_POLL))

    async def give_back(self, held: Held | None) -> None:
        if held is None:
            return
        try:
            await self.store.release(held.name, held.slot, done=False)
        except Exception as exc:  # the lease runs out on its own
            log.warning("could not free %s slot %g: %s", held.name, held.slot, exc)
