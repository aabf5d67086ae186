"""Benchmark 3: one group chat flooded with mentions of the bot.

The fake Bot API (in `bench.wire`'s process) posts mentions of the bot into one allowed
group while a 200 ms fake model answers; the real daemon runs here with the default queue
mode (`collect`), group concurrency (3) and queue cap (20). Every message is accounted for:
answered in a turn of its own, collected into a follow-up turn with others, or dropped with
a notice to the chat because the queue was full; "lost" counts the rest and must be 0. The
fake counts how many chat turns it answers at once, which must never exceed 3. Each flood
goes to a freshly started daemon; the first one right at start-up (the model SDK not yet
imported), the others after the daemon answered one DM. Meanwhile another user sends `/stop`
in a DM every 50 ms; its latency (update handed out -> answer sent) is reported.

    .venv/bin/python -m bench.group_flood [--messages 300] [--rate 50] [--burst 100]
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

from bench.harness import GROUP_CHAT, telegram_daemon, wait_idle
from bench.report import Report, parser
from bench.wire import Wire, use_loopback
from bot.store.sqlite.store import SQLiteStore

GROUP_LIMIT = 3
PACED = False  # --paced: keep the adapter's pacing to Telegram's 30 calls a second
TARGET_STOP_MS = 50.0  # /stop in another chat answered within this, p99 (issue 19)


def add_flood(report: Report, label: str, result: dict[str, float]) -> None:
    report.add(f"{label}: messages posted", result["messages"], "msgs")
    report.add(f"{label}: answered in a turn of their own", result["alone"], "msgs")
    report.add(f"{label}: collected into follow-up turns", result["collected"], "msgs")
    report.add(f"{label}: dropped with a notice (queue cap)", result["dropped_with_notice"], "msgs")
    report.add(f"{label}: lost", result["lost"], "msgs", target=1)
    report.add(f"{label}: answered twice", result["answered_twice"], "msgs", target=1)
    report.add(f"{label}: turns (model calls for the chat)", result["turns"], "turns")
    report.add(
        f"{label}: most chat turns at the model at once",
        result["model_max_in_flight"],
        "calls",
        target=GROUP_LIMIT + 1,
    )
    report.add(f"{label}: other model calls (compaction)", result["other_model_calls"], "calls")
    report.add(f"{label}: time until every message was accounted for", result["done_s"], "s")
    report.add(f"{label}: /stop in another chat meanwhile, answers", result["stop_probes"], "")
    report.add(f"{label}: /stop in another chat, p50", result["stop_p50_ms"], "ms")
    report.add(
        f"{label}: /stop in another chat, p99", result["stop_p99_ms"], "ms", target=TARGET_STOP_MS
    )
    report.add(f"{label}: /stop in another chat, max", result["stop_max_ms"], "ms")


async def flood(
    wire: Wire, report: Report, label: str, n: int, rate: float, *, warm: bool
) -> dict[str, float]:
    """One flood into a fresh daemon (an empty group session); `warm` answers a DM first,
    so the model SDK is loaded before the flood starts."""
    async with telegram_daemon(wire, paced=PACED) as daemon:
        if warm:
            await wire.call("dm", user=77, text="hello")
            await wait_idle(daemon)
        result = await wire.call("flood", chat=GROUP_CHAT, n=n, rate=rate)
        await wait_idle(daemon, timeout=120)
        if not result["dropped_with_notice"]:  # the notice no longer carries the count
            store = daemon.store
            assert isinstance(store, SQLiteStore)
            with contextlib.closing(sqlite3.connect(store.path)) as db:  # a reader of its own
                dropped = db.execute(
                    "SELECT count(*) FROM inbox WHERE chat_id = ? AND status = 'dropped'",
                    (str(GROUP_CHAT),),
                ).fetchone()[0]
            result["dropped_with_notice"] = dropped
            result["lost"] = n - result["reached_model"] - dropped
    add_flood(report, label, result)
    return result


async def main_async(messages: int, rate: float, burst: int, delay: float) -> Report:
    report = Report("group_flood", "3. A group chat flooded with mentions (collect mode)")
    async with Wire() as wire:
        await wire.call("model", delay=delay)
        # First, while this process has never imported the model SDK: a cold start.
        label = f"{messages} at {rate:g}/s from start"
        await flood(wire, report, label, messages, rate, warm=False)
        report.note(
            f"{label}: the flood begins as the daemon starts, so the first turns wait for the "
            "model SDK's first import (about 1 s, in a worker thread) while the queue fills"
        )
        await flood(wire, report, f"{messages} at {rate:g}/s", messages, rate, warm=True)
        result = await flood(wire, report, f"{burst} at once", burst, 0, warm=True)
        notices = result["drop_notices"]
        report.note(f"{burst} at once: {notices:.0f} drop notice message(s) went to the group")
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=300, help="paced flood size (300)")
    p.add_argument("--rate", type=float, default=50, help="paced flood, messages/s (50)")
    p.add_argument("--burst", type=int, default=100, help="all-at-once flood size (100)")
    p.add_argument("--delay", type=float, default=0.2, help="model latency, s (0.2)")
    p.add_argument("--paced", action="store_true", help="keep Telegram's 30/s pacing")
    args = p.parse_args()
    global PACED
    PACED = args.paced
    use_loopback()
    report = asyncio.run(main_async(args.messages, args.rate, args.burst, args.delay))
    report.save(args.json)


if __name__ == "__main__":
    main()
