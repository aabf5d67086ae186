"""This daemon in the store's `instances` table, so `perch status` can list the live ones.

A running daemon reports itself every few seconds (`InstanceBeacon.beat`, from its status
loop; the beat also renews the leases of the inbox rows it works on) with what it holds: its
channels and their state, active runs (and the sessions they run, so any instance's
dashboard lists and stops them), queued messages. An
instance not seen for `LIVE_WITHIN` seconds counts as gone (killed, or its host is down);
a clean stop removes its row. With PostgreSQL this lists daemons on every host.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from bot.store.roles import Instances, Lifecycle
from bot.store.rows import InstanceRow

log = logging.getLogger(__name__)


class InstanceStore(Lifecycle, Instances, Protocol):
    """This daemon's row among the instances, and where the store is."""


LIVE_WITHIN = 30.0
BEAT_EVERY = 5.0  # the most seconds between beats; shorter when `store.lease` is short


def beat_every(lease: float) -> float:
    """Beats come at least three times per lease, so a live instance never loses one."""
    return max(min(BEAT_EVERY, lease / 3), 0.2)


def summarise(status: dict[str, Any]) -> dict[str, Any]:
    """What an instance holds, from `Daemon.status()`: channels, runs, queue."""
    channels = status.get("channels", {})
    lanes = status.get("lanes", {})
    return {
        "channels": {name: bool(c.get("up")) for name, c in channels.items()},
        "standby": sorted(name for name, c in channels.items() if c.get("standby")),
        "leads": list(status.get("leads", [])),
        "active_runs": int(status.get("active_runs", 0)),
        "queued": int(status.get("queued", 0)),
        "runs": {key: int(lane["active"]) for key, lane in lanes.items() if lane.get("active")},
    }


class InstanceBeacon:
    """Reports one daemon to the store; `beat()` never raises (a database hiccup is logged)."""

    def __init__(
        self, store: InstanceStore, status: Callable[[], dict[str, Any]], instance_id: str
    ) -> None:
        self.store = store
        self.status = status
        self.id = instance_id  # from `store.hold_instance()`: its inbox rows are leased to it
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_at = time.time()

    async def beat(self) -> None:
        row = InstanceRow(
            self.id, self.host, self.pid, self.started_at, time.time(), summarise(self.status())
        )
        try:
            await self.store.instance_beat(row)
        except Exception as exc:
            log.warning("could not report this instance to %s: %s", self.store.location, exc)

    async def gone(self) -> None:
        try:
            await self.store.instance_gone(self.id)
        except Exception as exc:
            log.warning("could not remove this instance from %s: %s", self.store.location, exc)


def describe(instance: InstanceRow, now: float) -> str:
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(instance.started_at))
    channels = instance.detail.get("channels", {})
    standby = set(instance.detail.get("standby", []))
    leads = set(instance.detail.get("leads", []))

    def state(name: str, up: bool) -> str:
        if name in standby:
            return f"{name} (standby)"
        return f"{name}{' (leader)' if name in leads else ''}{'' if up else ' (down)'}"

    held = ", ".join(state(n, up) for n, up in channels.items()) or "none"
    return (
        f"{instance.host} pid {instance.pid} since {since} (seen {now - instance.seen_at:.0f}s "
        f"ago): channels {held}; {instance.detail.get('active_runs', 0)} active runs, "
        f"{instance.detail.get('queued', 0)} queued"
    )


async def live_instance_lines(store: InstanceStore) -> list[str]:
    now = time.time()
    return [describe(i, now) for i in await store.instances(now - LIVE_WITHIN)]
