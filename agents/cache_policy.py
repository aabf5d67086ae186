"""How long a session's prompt cache should live: `agent.cache.ttl` 5m | 1h | auto.

Anthropic keeps a cached prefix 5 minutes from its last use for 1.25x the input price to
write it, or 1 hour for 2x; a read costs 0.1x either way. People chat at all paces, so
`auto` chooses per session from the idle gaps before its last few runs (`CachePolicy`):

    P: the tokens a run could read (what the session's previous request sent)
    D: the tokens the run adds (the new message, tool rounds, the reply), in units of input
       price; each gap before a run falls in one of three kinds:
    gap <= 5 min    5m: 0.1P + 1.25D        1h: 0.1P + 2D        5m cheaper by 0.75D
    5 min .. 1 h    5m: 1.25(P + D)         1h: 0.1P + 2D        1h cheaper by 1.15P - 0.75D
    gap > 1 h       5m: 1.25(P + D)         1h: 2(P + D)         5m cheaper by 0.75(P + D)

With the shares f, m, s of the three kinds among the recent gaps, the hour pays when
m(1.15P - 0.75D) > 0.75(fD + s(P + D)). Perch takes D = P/4 (a chat turn adds less than a
quarter of what it reads once the conversation has begun; less favours the hour further), so
`auto` picks 1h when 0.9625m > 0.1875f + 0.9375s: one gap of 6 minutes among three fast
ones is enough (0.24 > 0.14); with a gap of over an hour in place of one of the fast ones it
is not (0.24 < 0.33). A session with no gap yet (its first run, or the first after a
restart) starts with 5m.

The prefix every chat shares (tools, persona, memory and skills: the system's breakpoints)
takes 1h under `auto`: some chat reads it at nearly any pace, so it is written about once an
hour at most, and a 1-hour mark must stand before a 5-minute one anyway.

Gaps are the idle time from the end of a session's previous run (its last model call) to the
start of the next, kept for the last `RECENT_GAPS` runs of at most `MAX_SESSIONS` sessions
(the least recently active dropped first); in memory only.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agents.cache_breakpoints import CachePlan
from agents.model import CacheTtl

CacheMode = Literal["5m", "1h", "auto"]

FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
RECENT_GAPS = 4
MAX_SESSIONS = 4096
GROWTH = 0.25  # D / P: what a run adds, as a share of what it reads


def choose_ttl(gaps: Sequence[float]) -> CacheTtl:
    """The cheaper life for a session whose recent idle gaps (seconds) were `gaps`."""
    if not gaps:
        return "5m"
    n = len(gaps)
    fast = sum(g <= FIVE_MINUTES for g in gaps) / n
    slow = sum(g > ONE_HOUR for g in gaps) / n
    middle = 1.0 - fast - slow
    hour_saves = middle * (1.15 - 0.75 * GROWTH)
    hour_costs = 0.75 * (fast * GROWTH + slow * (1 + GROWTH))
    return "1h" if hour_saves > hour_costs else "5m"


@dataclass(slots=True)
class _Pace:
    ended: float | None = None  # when the session's last run ended
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_GAPS))


class CachePolicy:
    """`plan(key)` when a run starts, `ended(key)` when it is over; `current(key)` for the
    requests in between. Cheap, in memory."""

    def __init__(
        self,
        mode: CacheMode = "auto",
        *,
        clock: Callable[[], float] = time.time,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.mode: CacheMode = mode
        self.clock = clock
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, _Pace] = OrderedDict()

    def plan(self, key: str) -> CachePlan:
        """The cache plan for a run of session `key` starting now (its gap is recorded)."""
        if self.mode != "auto":
            return CachePlan(self.mode, self.mode)
        pace = self._pace(key)
        if pace.ended is not None:
            pace.gaps.append(max(self.clock() - pace.ended, 0.0))
            pace.ended = None  # a run is under way: the next gap starts when it ends
        return CachePlan("1h", choose_ttl(pace.gaps))

    def current(self, key: str) -> CachePlan:
        """The plan of session `key`'s runs as it stands, recording nothing (for requests
        that are no run of their own, such as a compaction's)."""
        if self.mode != "auto":
            return CachePlan(self.mode, self.mode)
        pace = self._sessions.get(key)
        return CachePlan("1h", choose_ttl(pace.gaps) if pace is not None else "5m")

    def ended(self, key: str) -> None:
        """A run of session `key` is over: its idle time starts now."""
        if self.mode == "auto":
            self._pace(key).ended = self.clock()

    def _pace(self, key: str) -> _Pace:
        pace = self._sessions.get(key)
        if pace is None:
            pace = self._sessions[key] = _Pace()
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return pace
