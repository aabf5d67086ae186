"""Cron slots and heartbeat ticks that fire once across instances sharing a store.

Before a due job runs, the scheduler takes the claim `cron:<job id>` at the job's due time
(`Store.claim`); the instance that gets it runs the job and marks the claim done, the
others look again after `store.lease` seconds: by then the job has its next time, or the
claimant died (its lease ran out) and one of them runs it instead, so a due job fires
once and never zero times. A heartbeat tick claims `heartbeat` at its interval boundary
the same way. On a store that is not shared (SQLite, one daemon) every claim is granted
without a database round trip.
"""

from __future__ import annotations

from bot.store.roles import Claims

EARLY = 1.0  # a timer this many seconds before the job's time is not a due run


async def take(store: Claims, name: str, slot: float) -> bool:
    return await store.claim(name, slot) if store.shared else True


async def finish(store: Claims, name: str, slot: float, *, done: bool = True) -> None:
    if store.shared:
        await store.release(name, slot, done=done)


def not_yet(store: Claims, due: float | None, now: float) -> bool:
    """True if a timer fired for a job whose time moved on (another instance ran it)."""
    return store.shared and due is not None and due > now + EARLY
