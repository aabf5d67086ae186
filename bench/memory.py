"""Benchmark 4: resident memory and start-up time of a real `perch run` process.

`perch run` (as `python -m bot.operator.cli run`) is started with `NOTIFY_SOCKET` pointing at a unix
datagram socket this benchmark listens on, Telegram enabled against the fake Bot API and the
model against the fake Anthropic server (both served from this process). Start-up is the
time from exec to the daemon's `READY=1`; RSS is read from /proc after READY and 2 s of
idling, after a first turn (which loads the model SDK), and all of it again with 100,000
stored sessions (written to SQLite before start). SIGTERM ends each run; its exit is timed.

    .venv/bin/python -m bench.memory [--starts 5] [--sessions 100000]
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from bench.report import Report, parser
from bench.wire import ROOT, BenchModel, BenchTelegram, use_loopback
from bot.store.open import open_store

TARGET_IDLE_MB = 80.0
TARGET_START_S = 1.5
PRELOAD = True  # agent.preload_model (--no-preload: the SDK loads on the first turn)
TARGET_FIRST_EXTRA_MS = 100.0  # first reply after start vs a warm one
API_KEY = "sk-ant-bench-0123456789"


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no {field} for pid {pid}")


def write_config(
    folder: Path, telegram: BenchTelegram, model: BenchModel, preload: bool = True
) -> Path:
    path = folder / "config.yaml"
    data = {
        "agent": {"preload_model": preload},
        "providers": {"anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": model.base_url}},
        "store": {"path": "./data/perch.db"},
        "heartbeat": {"every": 0},
        "channels": {
            "console": {"enabled": False},
            "telegram": {
                "enabled": True,
                "token": telegram.token,
                "base_url": telegram.base_url,
                "dm_policy": "open",
                "allow_from": ["*"],
            },
        },
    }
    path.write_text(yaml.safe_dump(data))
    return path


async def store_sessions(db_path: Path, count: int) -> float:
    """Create `count` DM sessions of three turns each; returns the database size in MB."""
    store = await open_store(db_path)  # creates and migrates the schema
    await store.close()
    now = time.time()
    sessions, messages = [], []
    for i in range(count):
        sid = uuid.uuid4().hex
        key = f"agent:main:telegram:123456:dm:{5_000_000 + i}"
        sessions.append((sid, key, now - i, now - i, 1200, 300, 0.0123))
        for turn in range(3):
            user = [{"type": "text", "text": f"question {turn} from user {i}: how do I ...?"}]
            reply = [{"type": "text", "text": "A typical answer of a few sentences. " * 8}]
            messages.append((sid, "user", json.dumps(user), f"r{i}-{turn}", now))
            messages.append((sid, "assistant", json.dumps(reply), f"r{i}-{turn}", now))
    with sqlite3.connect(db_path) as db:
        db.executemany(
            "INSERT INTO sessions (id, key, created_at, updated_at, input_tokens, "
            "output_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?)",
            sessions,
        )
        db.executemany(
            "INSERT INTO messages (session_id, role, content, run_id, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            messages,
        )
    db.close()
    size = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*"))
    return size / 1e6


@dataclass
class Run:
    start_s: float
    idle_mb: float
    turn_mb: float
    peak_mb: float
    first_turn_ms: float
    second_turn_ms: float
    stop_s: float


class NotifySocket:
    """A unix datagram socket standing in for systemd's notification socket."""

    def __init__(self, folder: Path) -> None:
        self.path = str(folder / f"notify-{uuid.uuid4().hex[:8]}.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.setblocking(False)

    async def wait_for(self, word: str, timeout: float) -> float:
        """Wait for a datagram holding the line `word`; returns when it arrived."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while True:
                data = await loop.sock_recv(self.sock, 4096)
                if word in data.decode(errors="replace").splitlines():
                    return time.perf_counter()

    def close(self) -> None:
        self.sock.close()
        Path(self.path).unlink(missing_ok=True)


def open_log(path: Path) -> IO[bytes]:
    return path.open("ab")


async def log_line(path: Path, needle: bytes, after: int, timeout: float) -> bool:
    """Wait until the daemon's log has `needle` past byte `after` (False if it never came:
    preload is off)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in (await asyncio.to_thread(path.read_bytes))[after:]:
            return True
        await asyncio.sleep(0.05)
    return False


async def one_run(config: Path, telegram: BenchTelegram, user: int) -> Run:
    notify = NotifySocket(config.parent)
    env = {**use_loopback(), "ANTHROPIC_API_KEY": API_KEY, "NOTIFY_SOCKET": notify.path}
    log = open_log(config.parent / "perch.log")
    log_start = log.tell()
    try:
        began = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.operator.cli", "run", "--config", str(config),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=ROOT,
        )  # fmt: skip
        try:
            ready = await notify.wait_for("READY=1", 60)
            start_s = ready - began
            await asyncio.sleep(2)  # idle: let anything started at READY settle
            if PRELOAD:  # let the background load finish: its RSS counts as idle
                await log_line(
                    config.parent / "perch.log", b"model providers loaded", log_start, 60
                )
            idle = rss_mb(proc.pid)
            replies = telegram.replies[user]
            before = len(replies)

            def sent() -> list[float]:
                return [r.at for r in replies[before:] if r.method == "sendMessage"]

            pushed = time.monotonic()
            telegram.dm("hello, how are you today?", user_id=user)
            await telegram.until(lambda: bool(sent()), 60)
            first_turn_ms = (sent()[0] - pushed) * 1000
            await asyncio.sleep(1)
            pushed = time.monotonic()
            telegram.dm("and a second message", user_id=user)
            await telegram.until(lambda: len(sent()) >= 2, 60)
            second_turn_ms = (sent()[1] - pushed) * 1000
            await asyncio.sleep(0.5)
            turn = rss_mb(proc.pid)
            peak = rss_mb(proc.pid, "VmHWM")
            stopping = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(proc.wait(), 30)
            if code != 0:
                raise RuntimeError(f"perch run exited with {code}; see {log.name}")
            return Run(
                start_s, idle, turn, peak, first_turn_ms, second_turn_ms,
                time.perf_counter() - stopping,
            )  # fmt: skip
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    finally:
        log.close()
        notify.close()


async def runs(config: Path, telegram: BenchTelegram, starts: int, user: int) -> list[Run]:
    done = []
    for i in range(starts):
        done.append(await one_run(config, telegram, user + i))
    return done


def add_runs(report: Report, label: str, done: list[Run]) -> None:
    warm = done[1:] or done
    report.add(f"{label}: start-up, exec to READY (first start)", done[0].start_s, "s")
    report.add(
        f"{label}: start-up, exec to READY (median of {len(warm)} more)",
        statistics.median(r.start_s for r in warm),
        "s",
        target=TARGET_START_S,
    )
    report.add(
        f"{label}: RSS idle after READY",
        statistics.median(r.idle_mb for r in done),
        "MB",
        target=TARGET_IDLE_MB,
    )
    report.add(
        f"{label}: RSS after the first turn", statistics.median(r.turn_mb for r in done), "MB"
    )
    report.add(f"{label}: peak RSS (VmHWM)", max(r.peak_mb for r in done), "MB")
    report.add(
        f"{label}: first turn after start, update pushed -> sendMessage",
        statistics.median(r.first_turn_ms for r in done),
        "ms",
    )
    report.add(
        f"{label}: second turn (warm), update pushed -> sendMessage",
        statistics.median(r.second_turn_ms for r in done),
        "ms",
    )
    report.add(
        f"{label}: first turn slower than the second by",
        statistics.median(r.first_turn_ms - r.second_turn_ms for r in done),
        "ms",
        target=TARGET_FIRST_EXTRA_MS,
    )
    report.add(f"{label}: SIGTERM to exit", statistics.median(r.stop_s for r in done), "s")


IMPORTS = {
    "python alone": "pass",
    "import telegram.ext": "import telegram.ext",
    "import anthropic": "import anthropic",
    "import bot.daemon (what start-up imports)": "import bot.daemon",
    "import bot.daemon, channels.telegram.adapter, anthropic": (
        "import bot.daemon, channels.telegram.adapter, anthropic"
    ),
}


async def import_costs(report: Report) -> None:
    """RSS of a fresh interpreter after each import, to say whose megabytes they are."""
    for label, statement in IMPORTS.items():
        code = f"{statement}\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE, cwd=ROOT
        )
        out, _ = await proc.communicate()
        report.add(f"RSS of `python -c '{label}'`", int(out) / 1024, "MB")


async def main_async(starts: int, sessions: int) -> Report:
    report = Report("memory", "4. Memory and start-up of `perch run`")
    await import_costs(report)
    telegram = BenchTelegram()
    await telegram.start()
    try:
        async with BenchModel() as model:
            with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
                config = write_config(Path(tmp), telegram, model, PRELOAD)
                add_runs(report, "empty store", await runs(config, telegram, starts, 1000))
            with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
                config = write_config(Path(tmp), telegram, model, PRELOAD)
                size = await store_sessions(Path(tmp) / "data" / "perch.db", sessions)
                report.note(f"{sessions} stored sessions, 6 messages each: {size:.1f} MB database")
                # The first user of the first run writes into one of the stored sessions.
                add_runs(
                    report, f"{sessions} sessions", await runs(config, telegram, starts, 5_000_000)
                )
    finally:
        await telegram.stop()
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--starts", type=int, default=5, help="starts per store (default 5)")
    p.add_argument("--sessions", type=int, default=100_000, help="stored sessions (100000)")
    p.add_argument("--no-preload", action="store_true", help="agent.preload_model: false")
    args = p.parse_args()
    global PRELOAD
    PRELOAD = not args.no_preload
    use_loopback()
    os.environ.pop("NOTIFY_SOCKET", None)
    report = asyncio.run(main_async(args.starts, args.sessions))
    report.save(args.json)


if __name__ == "__main__":
    main()
