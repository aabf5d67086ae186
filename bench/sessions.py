"""Benchmark 7: memory against the number of people who spoke (issue 19).

The daemon runs in this process; the fake Bot API (in `bench.wire`'s process) sends bursts of
DMs from new users, 100 per `getUpdates`, with a zero-latency model. After 1,000 users and
again after 5,000 in all, the daemon is left idle, the collector runs, and the process's RSS
and Python's own heap (live objects, allocated bytes) are taken, with the sizes of the
per-session maps Perch keeps in memory. Flat means idle sessions keep nothing in memory.

    .venv/bin/python -m bench.sessions [--first 1000] [--total 5000] [--pin]
"""

from __future__ import annotations

import asyncio
import functools
import gc
import sys

from bench.harness import telegram_daemon, wait_idle
from bench.report import Report, parser
from bench.throughput import burst, rss_mb
from bench.wire import Wire, pin_apart, use_loopback
from bot.daemon import Daemon

TARGET_DELTA_MB = 15.0


def per_session_state(daemon: Daemon) -> dict[str, int]:
    """Entries in the in-memory maps that are keyed by session or chat."""
    gateway = daemon.gateway
    assert gateway is not None
    telegram = daemon.channels["telegram"]
    models = gateway.commands.models
    return {
        "gateway lanes": len(gateway.lanes),
        "group context buffers": len(gateway.group_context),
        "group context ratios": len(gateway.lanes._context_ratio),
        "/model choices cached": len(models._cache),
        "Telegram per-chat tails": len(getattr(telegram, "_tails", {})),
    }


async def snapshot(report: Report, daemon: Daemon, users: int) -> float:
    await asyncio.sleep(1)
    gc.collect()
    rss = rss_mb()
    report.add(f"after {users:,} users: RSS", rss, "MB")
    report.add(f"after {users:,} users: Python heap", sys.getallocatedblocks() * 64 / 2**20, "MB~")
    report.add(f"after {users:,} users: live objects tracked by gc", len(gc.get_objects()), "")
    for name, size in per_session_state(daemon).items():
        report.add(f"after {users:,} users: {name}", size, "entries")
    return rss


async def main_async(first: int, total: int) -> Report:
    report = Report("sessions", f"7. Memory after {first:,} and {total:,} users who spoke")
    async with Wire() as wire, telegram_daemon(wire) as daemon:
        idle = functools.partial(wait_idle, daemon)
        await wire.call("model", delay=0.0)
        await burst(wire, idle, 50)  # warm: the SDK loaded, caches filled
        await burst(wire, idle, first - 50)
        low = await snapshot(report, daemon, first)
        done = first
        while done < total:
            step = min(1000, total - done)
            await burst(wire, idle, step)
            done += step
        high = await snapshot(report, daemon, total)
        report.add(
            f"RSS growth from {first:,} to {total:,} users",
            high - low,
            "MB",
            target=TARGET_DELTA_MB,
        )
        report.add("per extra user", (high - low) * 2**20 / (total - first) / 1024, "KB")
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--first", type=int, default=1000, help="users in the first measure")
    p.add_argument("--total", type=int, default=5000, help="users in all")
    p.add_argument("--pin", action="store_true", help="pin Perch and the fakes to separate CPUs")
    args = p.parse_args()
    use_loopback()
    if args.pin:
        print(pin_apart())
    report = asyncio.run(main_async(args.first, args.total))
    report.save(args.json)


if __name__ == "__main__":
    main()
