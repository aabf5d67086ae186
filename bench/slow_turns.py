"""What holds the slow turns of the one-user 200-DM run (issue 40): a stack sampler.

Runs `--turns` sequential DMs from one user (zero-latency fake model, streaming off, the
shipped compaction settings: it compacts about every 25 turns) as `bench.overhead --users 1`
does, while a thread samples every thread's stack every `--every` ms. Then, for the turns
slower than twice the median (update -> sendMessage), it counts what the event loop's thread
was doing inside them: the innermost frame of Perch's own code (`agents/`, `bot/`,
`channels/`), or "idle" (waiting in the selector: the turn waits on another thread, a lock or
the network), and the same for the other threads. Prints p50, p90, p99 and those counts,
for each `--quiet` in turn (`SessionUpkeep.quiet`; 0 compacts at once, as before issue 40):
a before/after in one run.

    .venv/bin/python -m bench.slow_turns [--turns 200] [--warmup 10] [--quiet 0 1]
"""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from bench.harness import telegram_daemon, wait_idle
from bench.report import Report, parser, percentile
from bench.wire import ROOT, Wire, use_loopback

OURS = tuple(str(ROOT / part) for part in ("agents", "bot", "channels"))
TEXT = "hello there, a short message for the assistant"


def where(frame: FrameType | None) -> str:
    """The innermost frame of our code in a stack (or the innermost frame, or 'idle')."""
    innermost = frame
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(OURS):
            return f"{name[len(str(ROOT)) + 1 :]}:{frame.f_code.co_name}"
        frame = frame.f_back
    if innermost is not None and innermost.f_code.co_name in ("select", "poll", "_run_once"):
        return "idle"
    if innermost is None:
        return "?"
    chain: list[str] = []
    frame = innermost
    while frame is not None and len(chain) < 4:
        chain.append(f"{Path(frame.f_code.co_filename).stem}.{frame.f_code.co_name}")
        frame = frame.f_back
    return "(libraries) " + " < ".join(chain)


class GcPauses:
    """Every garbage collection's generation, start and length (gc.callbacks)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float, float]] = []
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.monotonic()
        else:
            self.pauses.append((info["generation"], self._began, time.monotonic() - self._began))

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


class Sampler:
    def __init__(self, every_s: float, compacting: Callable[[], bool]) -> None:
        self.every = every_s
        self.compacting = compacting
        self.samples: list[tuple[float, dict[str, str]]] = []
        self.loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        mine = threading.get_ident()
        while not self._stop.wait(self.every):
            now = time.monotonic()
            seen: dict[str, str] = {}
            for ident, frame in sys._current_frames().items():
                if ident == mine:
                    continue
                if ident not in names:
                    names = {t.ident: t.name for t in threading.enumerate()}
                label = "loop" if ident == self.loop_thread else names.get(ident, "?")
                seen[label] = where(frame)
            seen["compacting"] = "yes" if self.compacting() else "no"
            self.samples.append((now, seen))


async def main_async(turns: int, warmup: int, every_s: float, quiets: list[float]) -> Report:
    report = Report("slow_turns", f"What holds the slow turns: {turns} DMs from one user")
    for quiet in quiets:  # the same run: compaction at once (before issue 40's fix), then not
        print(f"-- compaction after {quiet:g} s of quiet", flush=True)
        await one_pass(report, turns, warmup, every_s, quiet)
    return report


async def one_pass(report: Report, turns: int, warmup: int, every_s: float, quiet: float) -> None:
    async with Wire() as wire, telegram_daemon(wire, streaming="off") as daemon:
        upkeep = daemon.upkeep
        assert upkeep is not None
        upkeep.quiet = quiet
        idle = functools.partial(wait_idle, daemon)
        for _ in range(warmup):
            await wire.call("dm", user=1000, text=TEXT)
            await idle()
        await wire.call("turns")
        with (
            Sampler(every_s, lambda: bool(upkeep._busy - upkeep._waiting.keys())) as sampler,
            GcPauses() as gcs,
        ):
            for _ in range(turns):
                await wire.call("dm", user=1000, text=TEXT)
                await idle()
        measured: list[dict[str, Any]] = (await wire.call("turns"))["turns"]
    to_send = [t["to_send_ms"] for t in measured]
    p50 = percentile(to_send, 50)
    report.add(f"quiet {quiet:g} s: update -> sendMessage p50", p50, "ms")
    report.add(f"quiet {quiet:g} s: update -> sendMessage p90", percentile(to_send, 90), "ms")
    report.add(f"quiet {quiet:g} s: update -> sendMessage p99", percentile(to_send, 99), "ms")
    report.add(f"quiet {quiet:g} s: p99 / p50", percentile(to_send, 99) / p50, "x", target=2.0)

    def overlaps(t: dict[str, Any]) -> bool:
        start, end = t["handed_at"], t["handed_at"] + t["to_send_ms"] / 1000
        return any(
            seen["compacting"] == "yes" for at, seen in sampler.samples if start <= at <= end
        )

    during = [t["to_send_ms"] for t in measured if overlaps(t)]
    apart = [t["to_send_ms"] for t in measured if not overlaps(t)]
    for label, group in (("while a compaction ran", during), ("with none running", apart)):
        if group:
            report.add(f"{label}: turns", len(group), "turns")
            report.add(f"{label}: p50", percentile(group, 50), "ms")
            report.add(f"{label}: max", max(group), "ms")
    for generation in (0, 1, 2):
        mine = [p[2] * 1000 for p in gcs.pauses if p[0] == generation]
        if mine:
            report.add(f"gc generation {generation}: collections", len(mine), "")
            report.add(f"gc generation {generation}: longest", max(mine), "ms")
    in_gc = 0.0
    slow = [t for t in measured if t["to_send_ms"] > 2 * p50]
    report.add("turns slower than 2x p50", len(slow), "turns")
    for t in slow:
        start, end = t["handed_at"], t["handed_at"] + t["to_send_ms"] / 1000
        in_gc += sum(length for _, at, length in gcs.pauses if start <= at <= end) * 1000
    report.add("slow turns: their time in gc, all of them", in_gc, "ms")
    report.add("slow turns: their time, all of them", sum(t["to_send_ms"] for t in slow), "ms")
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for t in slow:
        start, end = t["handed_at"], t["handed_at"] + t["to_send_ms"] / 1000
        for at, seen in sampler.samples:
            if start <= at <= end:
                for thread, place in seen.items():
                    counts[thread][place] += 1
    for _, seen in sampler.samples:
        if seen["compacting"] == "yes":
            counts["loop while a compaction ran (all turns)"][seen["loop"]] += 1
    for thread, counter in sorted(counts.items()):
        total = sum(counter.values())
        print(f"  {thread}: {total} samples in the slow turns")
        for place, n in counter.most_common(12):
            print(f"    {n / total * 100:5.1f}%  {place}")


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--every", type=float, default=2.0, help="ms between samples (2)")
    p.add_argument("--quiet", type=float, nargs="+", default=[0.0, 1.0],
                   help="SessionUpkeep.quiet of each pass, s (0 = compact at once; 1 shipped)")  # fmt: skip
    args = p.parse_args()
    use_loopback()
    report = asyncio.run(main_async(args.turns, args.warmup, args.every / 1000, args.quiet))
    report.save(args.json)


if __name__ == "__main__":
    main()
