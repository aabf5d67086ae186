"""The daily spending guard: `agent.budget.daily_usd` (0, the default, means off).

Spend is the sum of the `usage` table since midnight UTC (chats, cron, heartbeat and
sub-agents alike). At `warn_ratio` (80%) the owner is told once a day; at 100% `notice()`
returns a one-line explanation and the daemon stops spending: chats get that line instead of
a model call, cron jobs and heartbeats are skipped (a one-shot job waits), `spawn` is
refused, until the next UTC day or until the owner lifts it for the rest of the day with
`/budget lift`. A turn already running finishes (it may overshoot by one turn's cost).

Cheap per message: the day's spend is read from the store at most every `REFRESH_EVERY`
seconds and this daemon's own turns are added as they end, so a message costs no query
however busy the day was; spend elsewhere (sub-agents, compaction, other instances) shows
within that time. "Told today" and "lifted today" are claims in the store (done for the
day), so a restart or another instance sharing the store neither tells the owner again nor
forgets a lift.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot.config.agent import BudgetConfig
from bot.store.roles import Claims, UsageLedger

log = logging.getLogger(__name__)

TellOwner = Callable[[str], Awaitable[bool]]
REFRESH_EVERY = 15.0  # seconds between reads of the day's spend from the store
LIFT = "budget:lift"  # the claim that says the owner lifted the budget for the day


class BudgetStore(UsageLedger, Claims, Protocol):
    """The day's spend, and the claims that say who was told and whether it was lifted."""


class RunCost(Protocol):
    """What the usage listener is told of a finished turn (`bot.kernel.turn_outcome.SessionState`)."""

    @property
    def cost_usd(self) -> float: ...


def day_start(now: float | None = None) -> float:
    """Midnight UTC of the day `now` falls in."""
    now = time.time() if now is None else now
    return now - (now % 86400)


class Budget:
    """One daemon's guard. `notice()` is "" while spending may go on."""

    def __init__(
        self,
        settings: BudgetConfig,
        store: BudgetStore,
        tell_owner: TellOwner | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.store = store
        self.tell_owner = tell_owner
        self.clock = clock
        self._day = -1.0  # the UTC day the fields below are about
        self._spent = 0.0  # its spend as last read, plus this daemon's turns since
        self._read_at = float("-inf")
        self._lifted = False
        self._told: set[str] = set()  # "warn" | "stop": the owner was told (by anyone)

    @property
    def enabled(self) -> bool:
        return self.settings.daily_usd > 0

    def _today(self) -> float:
        today = day_start(self.clock())
        if today != self._day:  # a new day: nothing spent, nothing lifted or told yet
            self._day, self._spent, self._read_at = today, 0.0, float("-inf")
            self._lifted, self._told = False, set()
        return today

    async def spent_today(self) -> float:
        today = self._today()
        now = self.clock()
        if now - self._read_at >= REFRESH_EVERY:
            self._spent = (await self.store.usage_since(today)).cost_usd
            self._lifted = self._lifted or await self.store.claim_done(LIFT, today)
            self._read_at = now
        return self._spent

    def lifted(self) -> bool:
        return self._lifted and self._day == day_start(self.clock())

    async def notice(self) -> str:
        """Why nothing may be spent now, or "" when it may."""
        if not self.enabled:
            return ""
        spent = await self.spent_today()
        if self.lifted() or spent < self.settings.daily_usd:
            return ""
        await self._tell_once("stop", self._stop_text(spent))
        return self._stop_text(spent)

    async def after_run(self, run: RunCost) -> None:
        """Usage listener: count the turn, and tell the owner at the warning line and at
        the limit, once a day."""
        if not self.enabled:
            return
        read_before = self._read_at
        spent = await self.spent_today()
        if self._read_at == read_before:  # not read again: the turn's cost is not in it yet
            self._spent = spent = spent + run.cost_usd
        if self.lifted():
            return
        limit = self.settings.daily_usd
        if spent >= limit:
            await self._tell_once("stop", self._stop_text(spent))
        elif spent >= limit * self.settings.warn_ratio:
            await self._tell_once(
                "warn",
                f"Heads-up: ${spent:.2f} of today's ${limit:.2f} budget is spent "
                f"({spent / limit:.0%}). At 100% I pause cron, heartbeat and sub-agents and "
                "stop answering chats until midnight UTC (/budget lift overrides).",
            )

    async def lift(self) -> None:
        today = self._today()
        self._lifted = True
        if await self.store.claim(LIFT, today):
            await self.store.release(LIFT, today, done=True)
        log.warning("budget: lifted by the owner for the rest of today (UTC)")

    def status_line(self, spent: float) -> str:
        if not self.enabled:
            return "  budget: off (agent.budget.daily_usd)"
        limit = self.settings.daily_usd
        state = ", lifted for today" if self.lifted() else (", PAUSED" if spent >= limit else "")
        return f"  budget: ${spent:.2f} of ${limit:.2f} today ({spent / limit:.0%}){state}"

    async def command(self, argument: str, *, is_owner: bool) -> str:
        """`/budget` shows the state; `/budget lift` (owner only) lifts it for today."""
        spent = await self.spent_today()
        if argument.strip().lower() == "lift":
            if not is_owner:
                return "Only the owner can lift the budget."
            if not self.enabled:
                return "There is no daily budget (agent.budget.daily_usd is 0)."
            await self.lift()
            return f"Budget lifted for the rest of today (UTC); ${spent:.2f} spent so far."
        line = self.status_line(spent).strip()
        return line[0].upper() + line[1:] + ("\n/budget lift - lift it for today" * self.enabled)

    def _stop_text(self, spent: float) -> str:
        return (
            f"Today's budget of ${self.settings.daily_usd:.2f} is used up (${spent:.2f} spent), "
            "so I'm paused until midnight UTC; the owner can lift it with /budget lift."
        )

    async def _tell_once(self, kind: str, text: str) -> None:
        today = self._today()
        if kind in self._told:
            return
        self._told.add(kind)
        if not await self.store.claim(f"budget:{kind}", today):
            return  # told already: by another instance, or before a restart
        await self.store.release(f"budget:{kind}", today, done=True)
        log.warning("budget: %s", text)
        if self.tell_owner is not None:
            await self.tell_owner(text)
