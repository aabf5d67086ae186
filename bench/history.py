"""Benchmark 8: a turn's history work against the session's length (issue 19).

A session with 5,000 stored messages and a fresh one (10 messages): the CPU of what a turn
does with its history before the model call, reading it from the store and preparing it
(`prepare_history`, turn limit 50). "Whole session" is how turns read history before issue
19 (`Store.messages`, everything); "bounded tail" is `bot.hub.turn_inputs.load_history`, which reads
only the tail the turn limit can use. The difference is set beside the CPU of a whole turn
measured by `bench.overhead` (`--turn-cpu-ms`).

    .venv/bin/python -m bench.history [--messages 5000] [--turn-cpu-ms 8.2]
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from agents.history import prepare_history
from agents.model import Message, Usage
from bench.report import Report, parser
from bot.hub.turn_inputs import load_history
from bot.store.sqlite.store import SQLiteStore

TURNS = 50
WINDOW = 200_000


def pair(i: int) -> list[Message]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"question {i} " * 8}]},
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {i} " * 30}]},
    ]


async def cpu_ms(work: Callable[[], Awaitable[object]], rounds: int = 30) -> float:
    """Median CPU (all threads) of one call, in ms."""
    times = []
    for _ in range(rounds):
        began = time.process_time()
        await work()
        times.append((time.process_time() - began) * 1000)
    return statistics.median(times)


async def main_async(messages: int, turn_cpu_ms: float) -> Report:
    report = Report("history", f"8. History work of a turn: {messages:,} stored messages vs 10")
    with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
        store = await SQLiteStore.open(Path(tmp) / "perch.db")
        try:
            long = await store.session("telegram:dm:long")
            for i in range(messages // 2):
                await store.save_run(long.id, long.key, pair(i), usage=Usage())
            fresh = await store.session("telegram:dm:fresh")
            for i in range(5):
                await store.save_run(fresh.id, fresh.key, pair(i), usage=Usage())

            async def whole(session_id: str) -> None:
                stored = await store.messages(session_id)
                prepare_history(stored, max_turns=TURNS, context_window_tokens=WINDOW)

            async def tail(session_id: str) -> None:
                stored, _ = await load_history(store, session_id, TURNS)
                prepare_history(stored, max_turns=TURNS, context_window_tokens=WINDOW)

            results = {}
            for label, way in (("whole session", whole), ("bounded tail", tail)):
                for name, session in (("fresh", fresh), (f"{messages:,} messages", long)):
                    ms = await cpu_ms(lambda way=way, s=session.id: way(s))
                    results[(label, name)] = ms
                    report.add(f"{label}: {name}: history CPU", ms, "ms")
                extra = results[(label, f"{messages:,} messages")] - results[(label, "fresh")]
                report.add(
                    f"{label}: long session's extra, share of a {turn_cpu_ms:g} ms turn",
                    extra / turn_cpu_ms * 100,
                    "%",
                    target=20.0,
                )
        finally:
            await store.close()
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5000, help="stored messages (5000)")
    p.add_argument("--turn-cpu-ms", type=float, default=8.2, help="a whole turn's CPU (8.2)")
    args = p.parse_args()
    report = asyncio.run(main_async(args.messages, args.turn_cpu_ms))
    report.save(args.json)


if __name__ == "__main__":
    main()
