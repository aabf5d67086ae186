"""Benchmark 5: SQLite, turns persisted per second through `bot.store.roles.Store`.

A typical chat turn is a user message and an assistant reply of a few sentences, written by
`Store.save_run` in one transaction with its usage row; a tool turn adds a tool call and a
2 KB tool result. Measured one at a time and with 8 runs saving at once (the default run
cap), then the whole database work of one gateway turn (inbox row, session and history
load (the tail `bot.hub.turn_inputs.load_history` reads), save, inbox close), and the save through the
sqlite3 module directly. Each figure is the median of 3 rounds. The database lives in a temporary folder (its file
system is printed); WAL with synchronous=NORMAL, as the store opens it.

    .venv/bin/python -m bench.sqlite [--turns 2000]
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from agents.model import Message, Usage
from bench.report import Report, parser
from bot.store.open import open_store

SESSIONS = 200
REPLY = "Sure. Here is a short answer that runs for a few sentences, as most replies do. " * 4


def chat_turn(i: int) -> list[Message]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"question number {i}: how do I?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": REPLY}]},
    ]


def tool_turn(i: int) -> list[Message]:
    call = {"type": "tool_use", "id": f"toolu_{i:08d}", "name": "read_file", "input": {"path": "a"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i:08d}", "content": "x" * 2000}
    return [
        {"role": "user", "content": [{"type": "text", "text": f"read file a ({i})"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}, call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": REPLY}]},
    ]


USAGE = Usage(input_tokens=1500, output_tokens=120, cost_usd=0.0063)


_numbers = itertools.count()


async def rate(
    n: int, concurrency: int, work: Callable[[int], Awaitable[None]], repeats: int = 3
) -> float:
    """Calls per second of `work(i)` (each `i` new), `concurrency` at a time: the median of
    `repeats` rounds of `n` calls (thread hand-offs vary a lot from round to round)."""
    rates = []
    for _ in range(repeats):
        queue = (next(_numbers) for _ in range(n))

        async def worker(items: Iterator[int] = queue) -> None:
            for i in items:
                await work(i)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        rates.append(n / (time.perf_counter() - began))
    return statistics.median(rates)


async def main_async(turns: int) -> Report:
    report = Report("sqlite", "5. SQLite: turns persisted per second (Store.save_run)")
    with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
        path = Path(tmp) / "perch.db"
        store = await open_store(path)
        try:
            keys = [f"agent:main:telegram:1:dm:{u}" for u in range(SESSIONS)]
            ids = [(await store.session(k)).id for k in keys]

            async def save(i: int, messages: Callable[[int], list[Message]]) -> None:
                at = i % SESSIONS
                await store.save_run(ids[at], keys[at], messages(i), usage=USAGE, run_id=f"r{i}")

            for label, make in (
                ("chat turn (2 messages)", chat_turn),
                ("tool turn (4)", tool_turn),
            ):
                for concurrency in (1, 8):
                    work = functools.partial(save, messages=make)
                    per_s = await rate(turns, concurrency, work)
                    report.add(f"save_run, {label}, {concurrency} at a time", per_s, "turns/s")

            async def gateway_turn(i: int) -> None:
                # Many sessions, so histories stay short (as compaction keeps them).
                key = f"agent:main:telegram:1:dm:{9000 + i % (5 * SESSIONS)}"
                inbox = await store.inbox_add("telegram", "1", str(i), f"m{i}", {"text": "hi"}, key)
                session = await store.session(key)
                await store.recent_messages(session.id, 400)  # bot.hub.turn_inputs.load_history
                await store.save_run(session.id, key, chat_turn(i), usage=USAGE, run_id=f"g{i}")
                await store.inbox_close([inbox] if inbox else [], "done")

            for concurrency in (1, 8):
                per_s = await rate(turns, concurrency, gateway_turn)
                report.add(
                    f"a gateway turn's whole DB work, {concurrency} at a time", per_s, "turns/s"
                )
        finally:
            await store.close()
        direct = statistics.median(raw_sqlite(path, turns) for _ in range(3))
        report.add("sqlite3 module directly (no thread hand-off), chat turn", direct, "turns/s")
        size = sum(p.stat().st_size for p in path.parent.iterdir()) / 1e6
        report.note(f"database after the run: {size:.1f} MB, in {tmp} ({fs(Path(tmp))})")
    return report


def raw_sqlite(path: Path, turns: int) -> float:
    """The same transaction through the sqlite3 module, to show the thread hops' share."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    session = db.execute("SELECT id FROM sessions LIMIT 1").fetchone()[0]
    began = time.perf_counter()
    for i in range(turns):
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO messages (session_id, role, content, run_id, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(session, m["role"], json.dumps(m["content"]), f"x{i}", now) for m in chat_turn(i)],
        )
        db.execute(
            "UPDATE sessions SET updated_at = ?, input_tokens = input_tokens + ? WHERE id = ?",
            (now, 1500, session),
        )
        db.execute(
            "INSERT INTO usage (session_key, run_id, input_tokens, created_at) VALUES (?,?,?,?)",
            ("k", f"x{i}", 1500, now),
        )
        db.execute("COMMIT")
    per_s = turns / (time.perf_counter() - began)
    db.close()
    return per_s


def fs(path: Path) -> str:
    """The type of the file system `path` is on (ext4, tmpfs, ...), from /proc/mounts."""
    best = ("", "unknown file system")
    for line in Path("/proc/mounts").read_text().splitlines():
        _device, mount, kind, *_ = line.split()
        inside = str(path.resolve()).startswith(mount.rstrip("/") + "/") or mount == "/"
        if inside and len(mount) > len(best[0]):
            best = (mount, kind)
    return best[1]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=1000, help="turns per round (1000; 3 rounds)")
    args = p.parse_args()
    os.environ.pop("NOTIFY_SOCKET", None)
    report = asyncio.run(main_async(args.turns))
    report.save(args.json)


if __name__ == "__main__":
    main()
