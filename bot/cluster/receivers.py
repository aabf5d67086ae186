"""Several `perch run` instances on one shared store (PostgreSQL): who receives what.

Most channels receive on every instance (a webhook behind a load balancer, or a socket
where the platform hands each event to one connection; the inbox drops a message id seen
before). A channel whose plug-in says its mode needs a single receiver (a long poll, a
receive socket: `ChannelPlugin.single_receiver`) runs only on the instance that leads it
(`Store.leadership("channel:<key>")`, an advisory lock that goes with the leader's
connection); the others keep it in standby and try to take the lead every beat, so a dead
leader's channel is picked up within one beat. On a store that is not shared (SQLite) every
channel simply runs.

`Cluster.attach(gateway)` makes `/stop` and `/stopall` reach runs on every instance
(`bot/stops.py`). `Cluster.tick()` runs with every instance beat: it (re)takes leads and takes over inbox rows
whose lease ran out (another instance died mid-run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from bot.cluster.stops import RemoteStops
from bot.cron.jobs import POLL_EVERY
from bot.gateway import Gateway
from bot.store.roles import Store
from channels.registry import ChannelsConfig, single_receiver

log = logging.getLogger(__name__)

STANDBY = "standby: another instance receives on this channel"
BEAT_EVERY = 5.0  # the most seconds between beats; shorter when `store.lease` is short


def beat_every(lease: float) -> float:
    """Beats come at least three times per lease, so a live instance never loses one."""
    return max(min(BEAT_EVERY, lease / 3), 0.2)


def cron_poll_every(store: Store) -> float:
    """How often the scheduler looks for job changes: every beat when instances share the
    store (a job added on one is planned on all), else the single daemon's slow poll."""
    return beat_every(store.lease) if store.shared else POLL_EVERY


class Cluster:
    """This instance's part in a shared store (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        names: list[str],
        config: ChannelsConfig,
        start: Callable[[str], Awaitable[None]],
        stop: Callable[[str], Awaitable[None]],
    ) -> None:
        self.store = store
        self._start = start
        self._stop = stop
        self.followers = (
            {n for n in names if single_receiver(n, config.options(n))} if store.shared else set()
        )
        self.leading: set[str] = set()
        self._stops: asyncio.Task[None] | None = None

    def attach(self, gateway: Gateway) -> None:
        """With a shared store: `/stop` reaches runs on the other instances, and theirs
        reach this one's (polled in a task of its own until `close()`)."""
        if not self.store.shared:
            return
        stops = RemoteStops(self.store, gateway.stop_oldest, gateway.stop_all)
        gateway.commands.remote = stops
        self._stops = asyncio.create_task(stops.poll_forever(), name="remote-stops")

    async def close(self) -> None:
        if self._stops is not None:
            self._stops.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stops
            self._stops = None

    def standby(self, name: str) -> bool:
        """True while channel `name` waits for this instance to lead it."""
        return name in self.followers and name not in self.leading

    async def take_leads(self) -> None:
        for name in sorted(self.followers):
            try:
                lead = await self.store.leadership(f"channel:{name}")
            except Exception as exc:  # keep what we have; try again next beat
                log.warning("could not check who receives on %s: %s", name, exc)
                continue
            if lead and name not in self.leading:
                log.info("channel %s: this instance receives now (leader)", name)
                self.leading.add(name)
                try:
                    await self._start(name)
                except Exception as exc:  # a broken adapter: tried again next beat
                    log.error("channel %s could not start: %s", name, exc)
                    self.leading.discard(name)
            elif not lead and name in self.leading:
                log.warning("channel %s: another instance took over receiving", name)
                self.leading.discard(name)
                await self._stop(name)

    async def tick(self, gateway: Gateway | None) -> None:
        await self.take_leads()
        if gateway is None:
            return
        try:
            taken = await gateway.take_over()
        except Exception as exc:
            log.warning("could not check %s for abandoned messages: %s", self.store.location, exc)
            return
        if taken:
            log.info("took over %d message(s) another instance left unfinished", taken)
