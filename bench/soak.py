"""Benchmark 14: the soak, weeks of use played fast through the real daemon (issue 40).

The daemon runs in this process (Telegram against the fake Bot API, the fake model, both in
`bench.wire`'s process, as `bench.throughput` runs them) with the shipped compaction settings,
a heartbeat every minute and cron jobs the model adds. `--turns` DMs (100,000) rotate over
`--sessions` users (2,000), in waves of `--wave` users at once; every session thus keeps a
history that compacts about every 25 turns. Mixed in: tool calls (`[tool]`, 1 turn in 40),
requests the API refuses for good (`[reject]`, 1 in 97), a failed `getUpdates` (502, a
platform drop) every 10th wave, and `[cron]` jobs added in the first wave.

Every `--sample` turns, once the turns and the compactions they queued are done, it records
the RSS (after a `gc.collect()`; with what Python's allocator holds and glibc's free heap),
open files (sockets apart: the HTTP and store pools' connections), asyncio tasks,
threads, the database's size and its tables' rows, then reports the growth after warm-up:
between the first sample at or past `--warmup` turns (20,000) and the last. Targets: RSS
growth <= 10 MiB and 0 open files; the database's growth next to the rows it keeps.

    .venv/bin/python -m bench.soak [--backend sqlite|postgresql|both] [--turns 100000]
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json
import os
import sqlite3
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.harness import telegram_daemon, wait_idle
from bench.report import Report, parser
from bench.wire import Wire, use_loopback
from bot.daemon import Daemon
from tests.store_backends import PostgresServer, new_database, throwaway_postgres

FIRST_USER = 20_000_000
TOOL_EVERY, REJECT_EVERY, DROP_EVERY_WAVES, CRON_JOBS = 40, 97, 10, 3
TARGET_RSS_MIB, TARGET_FILES = 10.0, 0
TABLES = ("sessions", "messages", "search_docs", "usage", "inbox", "cron_jobs", "cron_runs")
HEARTBEAT = "# Heartbeat\n\n- Say how the soak goes, in one line.\n"


@dataclass
class Sample:
    turns: int
    seconds: float
    rss_mib: float
    open_files: int  # files on disk and pipes: the database, its WAL, the log ...
    tasks: int
    threads: int
    db_mib: float
    rows: dict[str, int]
    sockets: int = 0  # connections: HTTP keep-alive pools, the store's pool
    python_mib: float = 0.0  # what Python's allocator holds (sys.getallocatedblocks, 64 B)
    heap_free_mib: float = 0.0  # glibc: freed heap memory not returned to the system


def text_for(turn: int, user: int) -> str:
    words = f"message {turn} from {user}: the soak's ordinary chatter about plans and errands"
    if turn % TOOL_EVERY == 7:
        return f"[tool] {words}"
    if turn % REJECT_EVERY == 11:
        return f"[reject] {words}"
    return words


async def soak(wire: Wire, daemon: Daemon, args: Any, db: DatabaseProbe) -> list[Sample]:
    users = [FIRST_USER + i for i in range(args.sessions)]
    workspace = daemon.config.workspace
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "HEARTBEAT.md").write_text(HEARTBEAT)
    cron = [f"[cron] add a job {i}" for i in range(CRON_JOBS)]
    await wire.call("soak", users=users[:CRON_JOBS], texts=cron, drop=False)
    await wait_idle(daemon)
    samples = [await sample(0, 0.0, db)]
    began, turn, wave = time.monotonic(), 0, 0
    baseline: tracemalloc.Snapshot | None = None
    while turn < args.turns:
        size = min(args.wave, args.turns - turn)
        who = [users[(turn + i) % len(users)] for i in range(size)]
        texts = [text_for(turn + i, user) for i, user in enumerate(who)]
        answer = await wire.call("soak", users=who, texts=texts, drop=wave % DROP_EVERY_WAVES == 5)
        if "error" in answer:
            raise RuntimeError(f"turn {turn}: {answer['error']}")
        turn, wave = turn + size, wave + 1
        if turn % args.sample < size or turn == args.turns:
            await wait_idle(daemon)
            if daemon.upkeep is not None:  # the compactions a wave queued, done too
                await asyncio.wait_for(daemon.upkeep.wait_idle(), 300)
            samples.append(await sample(turn, time.monotonic() - began, db))
            print(_line(samples[-1], answer.get("model", {})), flush=True)
            if args.tracemalloc and turn >= args.warmup:
                baseline = _trace(baseline, args.tracemalloc)
    return samples


def _trace(since: tracemalloc.Snapshot | None, frames: int) -> tracemalloc.Snapshot:
    """With `--tracemalloc`: start tracing at the warm-up's sample, then print what grew
    since it, by the allocating tracebacks (a leak's hunt, not a figure: tracing slows the
    turns several times)."""
    if since is None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(frames)
        return tracemalloc.take_snapshot()
    gc.collect()
    now = tracemalloc.take_snapshot()
    for stat in now.compare_to(since, "traceback")[:12]:
        if stat.size_diff <= 0:
            break
        print(f"    +{stat.size_diff / 1024:8.1f} KiB in {stat.count_diff:+} blocks", flush=True)
        for line in stat.traceback.format(limit=frames)[-2 * frames :]:
            print(f"      {line}", flush=True)
    return since


async def sample(turns: int, seconds: float, db: DatabaseProbe) -> Sample:
    gc.collect()
    rss = _status_kib("VmRSS") / 1024
    links = [_link(fd) for fd in os.listdir("/proc/self/fd")]
    sockets = sum(link.startswith("socket:") for link in links)
    files = len(links) - sockets - 1  # the listing's own descriptor left out
    threads = len(os.listdir("/proc/self/task"))
    tasks = len(asyncio.all_tasks())
    size, rows = await db.measure()
    python, free = sys.getallocatedblocks() * 64 / 2**20, _heap_free() / 2**20
    return Sample(
        turns, seconds, rss, files, tasks, threads, size / 2**20, rows, sockets, python, free
    )


def _link(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor, closed by now
        return ""


def _heap_free() -> int:
    """glibc's `mallinfo2().fordblks`: free bytes its arenas keep (0 off glibc)."""
    try:
        libc = ctypes.CDLL(None)
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return 0
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().fordblks)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _line(s: Sample, model: dict[str, int]) -> str:
    rows = ", ".join(f"{k} {v:,}" for k, v in s.rows.items())
    return (
        f"  {s.turns:>7,} turns {s.seconds:7.0f} s  RSS {s.rss_mib:6.1f} MiB"
        f" (Python {s.python_mib:.1f}, heap free {s.heap_free_mib:.1f})  files {s.open_files}"
        f"  sockets {s.sockets}"
        f"  tasks {s.tasks}  threads {s.threads}  db {s.db_mib:6.1f} MiB  ({rows}) model {model}"
    )


class DatabaseProbe:
    """The store's size on disk and its rows, read beside the daemon's own connection."""

    def __init__(self, sqlite_path: Path | None = None, url: str | None = None) -> None:
        self.sqlite_path, self.url = sqlite_path, url

    async def measure(self) -> tuple[int, dict[str, int]]:
        if self.url is not None:
            import asyncpg

            conn = await asyncpg.connect(self.url)
            try:
                size = int(await conn.fetchval("SELECT pg_database_size(current_database())"))
                rows = {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}
            finally:
                await conn.close()
            return size, rows
        assert self.sqlite_path is not None
        path = self.sqlite_path
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            rows = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        return size, rows


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    with throwaway_postgres() as server:
        if server is None:
            raise SystemExit("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
        yield server


@contextlib.asynccontextmanager
async def backend_daemon(
    wire: Wire, backend: str, server: PostgresServer | None
) -> AsyncIterator[tuple[Daemon, DatabaseProbe]]:
    overrides: dict[str, Any] = {
        "heartbeat.every": "1m",
        "heartbeat.target": {"channel": "telegram", "to": str(FIRST_USER)},
    }
    url = None
    if backend == "postgresql":
        assert server is not None
        url = await new_database(server)
        overrides["store.url"] = url
    async with telegram_daemon(wire, streaming="off", overrides=overrides) as daemon:
        probe = DatabaseProbe(url=url) if url else DatabaseProbe(daemon.config.db_path)
        yield daemon, probe


def summarise(report: Report, backend: str, samples: list[Sample], warmup: int) -> None:
    after = [s for s in samples if s.turns >= warmup]
    first, last = (after[0], samples[-1]) if after else (samples[0], samples[-1])
    span = f"{first.turns:,} -> {last.turns:,} turns"
    report.add(f"{backend}: turns per second", last.turns / max(last.seconds, 1e-9), "turns/s")
    report.add(f"{backend}: RSS at the end", last.rss_mib, "MiB")
    report.add(f"{backend}: RSS growth, {span}", last.rss_mib - first.rss_mib, "MiB",
               target=TARGET_RSS_MIB)  # fmt: skip
    report.add(f"{backend}: open files growth, {span}", last.open_files - first.open_files,
               "files", target=TARGET_FILES + 0.5)  # fmt: skip
    report.add(f"{backend}: sockets growth, {span}", last.sockets - first.sockets, "sockets")
    report.add(f"{backend}: asyncio tasks growth, {span}", last.tasks - first.tasks, "tasks")
    report.add(f"{backend}: threads growth, {span}", last.threads - first.threads, "threads")
    report.add(f"{backend}: database growth, {span}", last.db_mib - first.db_mib, "MiB")
    for table in TABLES:
        grown = last.rows.get(table, 0) - first.rows.get(table, 0)
        report.add(f"{backend}: {table} rows growth, {span}", grown, "rows")


async def main_async(args: Any) -> tuple[Report, dict[str, list[dict[str, Any]]]]:
    report = Report("soak", f"14. Soak: {args.turns:,} turns over {args.sessions:,} sessions")
    every: dict[str, list[dict[str, Any]]] = {}
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    for backend in backends:
        print(f"{backend}:", flush=True)
        with postgres() if backend == "postgresql" else contextlib.nullcontext() as server:
            async with Wire() as wire, backend_daemon(wire, backend, server) as (daemon, probe):
                samples = await soak(wire, daemon, args, probe)
        summarise(report, backend, samples, args.warmup)
        every[backend] = [asdict(s) for s in samples]
    return report, every


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    p.add_argument("--turns", type=int, default=100_000)
    p.add_argument("--sessions", type=int, default=2_000)
    p.add_argument("--wave", type=int, default=200, help="users whose DMs arrive at once")
    p.add_argument("--sample", type=int, default=5_000, help="turns between samples")
    p.add_argument("--warmup", type=int, default=20_000, help="turns before the slope's start")
    p.add_argument("--samples", metavar="PATH", help="write every sample to PATH as JSON")
    p.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                   help="trace allocations after warm-up and print what grew (slow)")  # fmt: skip
    args = p.parse_args()
    use_loopback()
    report, samples = asyncio.run(main_async(args))
    report.save(args.json)
    if args.samples:
        Path(args.samples).write_text(json.dumps(samples, indent=1))


if __name__ == "__main__":
    main()
