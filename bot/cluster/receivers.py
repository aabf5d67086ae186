"""Several `perch run` instances on one shared store (PostgreSQL): who receives what.

Most channels receive on every instance (a webhook behind a load balancer, or a socket
where the platform hands each event to one connection; the inbox drops a message id seen
before). A channel whose plug-in says its mode needs a single receiver (a long poll, a
receive socket: `ChannelPlugin.single_receiver`) runs only on the instance that leads it
(`Store.leadership("channel:<key>")`, an advisory lock that goes with the leader's
connection); the others keep it in standby and try to take the lead every beat, so a dead
leader's channel is picked up within one beat. On a store that is not shared (SQLite) every
channel simply runs.

`Cluster` opens the channels this instance receives on (`open(name)` for each of `local()`,
every channel but the standby ones; `take_leads()` opens those it leads) and closes them
(`close()`). With a shared
store it applies the other instances' `/stop` requests to this instance's runs
(`bot/cluster/stops.py`). `tick()` runs with every instance beat: it (re)takes leads and
takes over inbox rows whose lease ran out (another instance died mid-run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Protocol

from bot.cluster.stops import StopListener, StopStore
from bot.kernel.sessions import SessionKey
from channels.base import Channel, Inbound
from channels.registry import ChannelsConfig, single_receiver

log = logging.getLogger(__name__)


class ClusterStore(StopStore, Protocol):
    """Leadership, stop requests and claims, and where the store is."""


class Intake(Protocol):
    """The gateway as the cluster uses it."""

    async def on_message(self, inbound: Inbound) -> None: ...

    def stop_oldest(self, key: SessionKey) -> bool: ...

    def stop_all(self, key: SessionKey) -> tuple[int, int]: ...


class TakeOver(Protocol):
    """The inbox recovery as the cluster uses it: re-run a dead instance's messages, and
    forget what is older than a week once a day."""

    async def take_over(self) -> int: ...

    async def forget_old(self) -> None: ...


class Cluster:
    """This instance's receivers, and its part in a shared store (see the module docstring)."""

    def __init__(
        self,
        store: ClusterStore,
        channels: Mapping[str, Channel],
        config: ChannelsConfig,
        gateway: Intake,
        recovery: TakeOver,
    ) -> None:
        self.store = store
        self.channels = channels
        self.gateway = gateway
        self.recovery = recovery
        self.followers = (
            {n for n, _ in channels.items() if single_receiver(n, config.options(n))}
            if store.shared
            else set()
        )
        self.leading: set[str] = set()
        self.opened: dict[str, Channel] = {}  # channels whose start() was called
        self._stop_requests = (
            StopListener(store, gateway.stop_oldest, gateway.stop_all) if store.shared else None
        )
        self._polling: asyncio.Task[None] | None = None

    def local(self) -> list[str]:
        """The channels this instance receives on whoever leads (all but the standby ones)."""
        return [name for name in self.channels if name not in self.followers]

    async def open(self, name: str) -> None:
        """Start receiving on `name`. An adapter that raises here is broken and the error
        goes up (an unreachable platform is not: its adapter retries by itself)."""
        channel = self.channels[name]
        self.opened[name] = channel
        await channel.start(self.gateway.on_message)
        log.info("channel %s: %s", name, channel.status().detail or "started")

    def listen(self) -> None:
        """With a shared store: apply the other instances' stop requests from now on."""
        if self._stop_requests is not None:
            self._polling = asyncio.create_task(
                self._stop_requests.poll_forever(), name="remote-stops"
            )

    async def close(self) -> None:
        if self._polling is not None:
            self._polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._polling
            self._polling = None
        for name in list(self.opened):
            await self._close(name)

    async def _close(self, name: str) -> None:
        channel = self.opened.pop(name, None)
        if channel is not None:
            try:
                await asyncio.wait_for(channel.stop(), timeout=5)
            except Exception as exc:
                log.warning("channel %s did not stop cleanly: %s", name, exc)

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
                    await self.open(name)
                except Exception as exc:  # a broken adapter: tried again next beat
                    log.error("channel %s could not start: %s", name, exc)
                    self.leading.discard(name)
            elif not lead and name in self.leading:
                log.warning("channel %s: another instance took over receiving", name)
                self.leading.discard(name)
                await self._close(name)

    async def tick(self) -> None:
        await self.take_leads()
        try:
            taken = await self.recovery.take_over()
            await self.recovery.forget_old()
        except Exception as exc:
            log.warning("could not check %s for abandoned messages: %s", self.store.location, exc)
            return
        if taken:
            log.info("took over %d message(s) another instance left unfinished", taken)
