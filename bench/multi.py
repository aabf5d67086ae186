"""7. 1,000 DMs through two `perch run` instances on one PostgreSQL database vs one instance.

Each instance is a real `perch run` process with Telegram in webhook mode; this script plays
Telegram (posting every update to the instances' webhook ports in turn, at most `--inflight`
posts at a time) and runs the fake Bot API (for the answers) and the fake model (an echo
after `--delay` seconds) in its own process. Measured: turns per second from the first post
to the last answer, and the instances' CPU time (user + system from /proc, all their
threads) per turn. A throwaway PostgreSQL server (the machine's binaries, as in the tests)
holds a fresh database per run.

    .venv/bin/python -m bench.multi [--dms 1000] [--delay 0.2] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.store_backends import PostgresServer, new_database, throwaway_postgres

SECRET = "bench-s3cret"
TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _configure(home: Path, url: str, model: str, tg: FakeTelegram) -> int:
    """Write the instance's config.yaml; returns its webhook port."""
    home.mkdir(parents=True)
    port = _free_port()
    config = {
        "providers": {"anthropic": {"api_key": "sk-ant-bench-1234567890", "base_url": model}},
        "heartbeat": {"every": 0},
        "logging": {"level": "WARNING"},
        "store": {"url": url},
        "channels": {
            "console": {"enabled": False},
            "telegram": {
                "enabled": True, "token": TOKEN, "base_url": tg.base_url,
                "dm_policy": "open", "allow_from": ["*"], "streaming": "off",
                "mode": "webhook", "webhook_url": "https://bench.example/tg/hook",
                "webhook_secret": SECRET, "webhook_port": port,
            },
        },
    }  # fmt: skip
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    return port


async def _start(home: Path, url: str, model: str, tg: FakeTelegram) -> tuple[Any, int]:
    port = await asyncio.to_thread(_configure, home, url, model, tg)
    log = (home / "perch.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.operator.cli", "run", "--config", str(home / "config.yaml"),
        stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, cwd=home,
    )  # fmt: skip
    log.close()
    return proc, port


async def _ready(port: int, timeout: float = 90) -> None:
    """Until the webhook answers (403 to a post without the secret)."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.post(f"http://127.0.0.1:{port}/tg/hook", json={}) as response:
                    if response.status == 403:
                        return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"no instance listening on port {port}")


async def measure(server: PostgresServer, instances: int, dms: int, delay: float,
                  inflight: int) -> dict[str, Any]:  # fmt: skip
    url = await new_database(server)
    async with FakeAnthropic() as model, FakeTelegram() as tg:
        model.default = lambda body: Reply.text("echo: " + last_user_text(body), delay=delay)
        with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
            started = [
                await _start(Path(tmp) / f"i{n}", url, model.base_url, tg) for n in range(instances)
            ]
            try:
                for _, port in started:
                    await _ready(port)
                ports = itertools.cycle([port for _, port in started])
                cpu0 = sum(_cpu_seconds(p.pid) for p, _ in started)
                gate = asyncio.Semaphore(inflight)
                began = time.perf_counter()
                async with aiohttp.ClientSession() as http:

                    async def post(n: int, port: int) -> None:
                        user = 10_000 + n
                        update = {"update_id": n + 1, "message": {
                            "message_id": n + 1, "date": int(time.time()),
                            "chat": {"id": user, "type": "private", "first_name": "B"},
                            "from": {"id": user, "is_bot": False, "first_name": "B"},
                            "text": f"hello {n}",
                        }}  # fmt: skip
                        async with gate, http.post(
                            f"http://127.0.0.1:{port}/tg/hook", json=update,
                            headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
                        ) as response:  # fmt: skip
                            response.raise_for_status()

                    await asyncio.gather(*(post(n, next(ports)) for n in range(dms)))
                    await tg.wait_for("sendMessage", dms, timeout=600)
                elapsed = time.perf_counter() - began
                cpu = sum(_cpu_seconds(p.pid) for p, _ in started) - cpu0
            finally:
                for proc, _ in started:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(signal.SIGTERM)
                for proc, _ in started:
                    await proc.wait()
    return {
        "instances": instances,
        "dms": dms,
        "model_delay_s": delay,
        "turns_per_s": round(dms / elapsed, 1),
        "cpu_ms_per_turn": round(cpu * 1000 / dms, 2),
        "elapsed_s": round(elapsed, 1),
    }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dms", type=int, default=1000)
    parser.add_argument("--delay", type=float, default=0.2, help="model latency, seconds")
    parser.add_argument("--inflight", type=int, default=50, help="concurrent webhook posts")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with throwaway_postgres() as server:
        if server is None:
            print("no PostgreSQL server binaries (initdb, pg_ctl) on this machine")
            return 1
        results = [await measure(server, n, args.dms, args.delay, args.inflight) for n in (1, 2)]
    print(f"cpus: {os.cpu_count()}, python {sys.version.split()[0]}")
    print("| instances | DMs | model delay | turns/s | Perch CPU per turn | wall |")
    print("|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['instances']} | {r['dms']} | {r['model_delay_s']:g} s | {r['turns_per_s']} "
              f"| {r['cpu_ms_per_turn']} ms | {r['elapsed_s']} s |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
