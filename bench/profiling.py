"""cProfile around a measured phase, summarised by where the time went.

`where_time_went(profile)` groups the profile's own time (tottime) by package: Perch's
`agents/`, `bot/`, `channels/`, and each library (python-telegram-bot, httpx, the Anthropic
SDK, asyncio, logging, ...), and lists the costliest functions. The loop's waits in epoll
are idle, not work, and are left out. cProfile sees the event loop's thread only; the SQLite
store's database thread is outside it (it shows in the process CPU time instead).
"""

from __future__ import annotations

import cProfile
import pstats
from collections import Counter

# (path fragment, label), first match wins.
_GROUPS = [
    ("/telegram/", "python-telegram-bot"),
    ("/anthropic/", "anthropic SDK"),
    ("/httpx2/", "httpx2 (anthropic's HTTP client)"),
    ("/httpx/", "httpx (PTB's HTTP client)"),
    ("/httpcore/", "httpcore"),
    ("/h11/", "h11"),
    ("/anyio/", "anyio"),
    ("/pydantic", "pydantic"),
    ("/tenacity/", "tenacity"),
    ("/aiohttp/", "aiohttp"),
    ("/asyncio/", "asyncio"),
    ("/logging/", "logging"),
    ("/json/", "json"),
    ("/agents/", "Perch agents/"),
    ("/bot/", "Perch bot/"),
    ("/channels/", "Perch channels/"),
    ("/bench/", "benchmark driver"),
]


_IDLE = {"<method 'poll' of 'select.epoll' objects>", "select"}


def _group(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C: sockets, json, sqlite3 calls, ...)"
    for fragment, label in _GROUPS:
        if fragment in filename:
            return label
    return "other Python"


def tally(profile: cProfile.Profile) -> tuple[Counter[str], Counter[str], float, float]:
    """Own time by package and by function, the total, and the idle time in epoll."""
    stats = pstats.Stats(profile)
    raw = stats.stats  # type: ignore[attr-defined]
    by_group: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    total = 0.0
    idle = 0.0
    for (filename, line, name), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        if name in _IDLE:
            idle += tottime
            continue
        by_group[_group(filename)] += tottime
        short = filename.split("site-packages/")[-1].split("/main/")[-1]
        by_function[f"{short}:{line}({name})"] += tottime
        total += tottime
    return by_group, by_function, total, idle


def difference(perch: Counter[str], floor: Counter[str], turns: int, top: int = 12) -> str:
    """Perch's own time minus the floor's, by package (ms per turn), largest first."""
    keys = set(perch) | set(floor)
    diff = sorted(((perch[k] - floor[k], k) for k in keys), reverse=True)
    lines = ["  Perch minus the floor, own time by package (ms per turn, cProfile-inflated):"]
    for seconds, label in diff[:top]:
        lines.append(f"    {label:<48} {seconds / turns * 1000:+7.3f}")
    extra = sum(perch.values()) - sum(floor.values())
    lines.append(f"    {'all':<48} {extra / turns * 1000:+7.3f}")
    return "\n".join(lines)


def where_time_went(profile: cProfile.Profile, turns: int, top: int = 20) -> str:
    by_group, by_function, total, idle = tally(profile)
    lines = [
        f"  profiled time on the event loop thread: {total / turns * 1000:.2f} ms per turn "
        f"(cProfile inflates it), plus {idle / turns * 1000:.2f} ms idle in epoll"
    ]
    lines.append("  own time by package (ms per turn, share):")
    for label, seconds in by_group.most_common():
        lines.append(f"    {label:<48} {seconds / turns * 1000:7.3f}  {seconds / total:6.1%}")
    lines.append(f"  costliest {top} functions by own time (ms per turn):")
    for where, seconds in by_function.most_common(top):
        lines.append(f"    {seconds / turns * 1000:7.3f}  {where}")
    ours = Counter(
        {w: s for w, s in by_function.items() if w.startswith(("agents/", "bot/", "channels/"))}
    )
    lines.append(f"  Perch's own costliest {top} functions by own time (ms per turn):")
    for where, seconds in ours.most_common(top):
        lines.append(f"    {seconds / turns * 1000:7.3f}  {where}")
    return "\n".join(lines)
