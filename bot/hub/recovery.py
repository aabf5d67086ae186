"""Crash recovery: what the inbox holds unfinished is run again, or its sender is told.

Every accepted message is in the inbox before it is processed (`bot/hub/gateway.py`). At start,
`recover()` re-runs the rows a crash left open within `gateway.recovery_window` (15 min) and
asks the senders of older ones to resend; with a store shared by several instances,
`take_over()` does the same every beat for rows whose instance died (their lease ran out).
Closed rows and claims older than a week are forgotten: at start and then once a day
(`prune_every`), from the same beat, so a daemon that runs for months keeps a week of them,
not all (the soak benchmark found them kept until the next restart).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Protocol

from bot.config.schema import Config
from bot.hub.inbox_payload import inbound_from_payload, where
from bot.kernel.sessions import SessionKey
from bot.store.roles import Claims, Inbox
from channels.base import ChatRef, Inbound

log = logging.getLogger(__name__)

LOST_NOTICE = "I restarted and lost your message from {when}; please resend it."
FORGET_AFTER = 7 * 86400.0
PRUNE_EVERY = 86400.0  # how often a running daemon forgets what is older than FORGET_AFTER


class RecoveryStore(Inbox, Claims, Protocol):
    """The inbox rows to take over, and the old rows and claims to forget."""


class Intake(Protocol):
    """The gateway as recovery uses it."""

    accepting: bool

    async def process(self, inbound: Inbound, key: SessionKey, inbox_id: int | None) -> None: ...

    async def close(self, ids: Iterable[int | None], status: str) -> None: ...

    async def send(self, chat: ChatRef, text: str, *, urgent: bool = False) -> None: ...


class InboxRecovery:
    def __init__(self, config: Config, store: RecoveryStore, gateway: Intake) -> None:
        self.config = config
        self.store = store
        self.gateway = gateway
        self.prune_every = PRUNE_EVERY
        self._pruned_at: float | None = None  # monotonic; None: not yet

    async def recover(self) -> int:
        """Re-run what a crash left unfinished; returns how many messages were re-run."""
        rerun = await self.take_over()
        await self.forget_old()
        return rerun

    async def forget_old(self) -> None:
        """Forget closed inbox rows and claims older than a week, at most once per
        `prune_every` (called at start and on every beat)."""
        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < self.prune_every:
            return
        self._pruned_at = now
        await self.store.inbox_prune(time.time() - FORGET_AFTER)
        await self.store.claims_prune(time.time() - FORGET_AFTER)

    async def take_over(self) -> int:
        """Run the inbox rows whose lease ran out (a crash; with a shared store, another
        instance that died): at start and every few seconds while running."""
        if not self.gateway.accepting:
            return 0
        window = self.config.gateway.recovery_window
        now = time.time()
        rerun = 0
        for row in await self.store.inbox_claim():
            inbound = inbound_from_payload(row.payload)
            if inbound is None:
                await self.gateway.close([row.id], "failed")
                continue
            if now - row.received_at > window:
                when = time.strftime("%H:%M", time.localtime(row.received_at))
                await self.gateway.close([row.id], "expired")
                await self.gateway.send(inbound.chat, LOST_NOTICE.format(when=when))
                continue
            rerun += 1
            log.info("recovering message %s from %s", row.message_id, where(inbound))
            key = SessionKey.for_chat(self.config.agent.id, inbound.chat)
            await self.gateway.process(inbound, key, row.id)
        return rerun
