"""Benchmark 1: Perch's own cost per turn, end to end through the Telegram adapter.

A zero-latency fake model, the fake Bot API in another process (`bench.wire`), and the real
daemon in this one. One DM at a time, users in rotation (sessions carry up to 12 turns);
each latency runs from the moment `getUpdates` hands the update out to the moment the fake
receives the reply's `sendMessage` (and, with streaming previews, the final edit). CPU per
turn is this process's CPU time (every thread) over the measured turns; the fakes' CPU is
reported apart. The same turns through `bench.bare.BareBot` (the libraries alone) give the
floor under Perch. `--profile` adds a cProfile pass that says where Perch's time goes, and
the same for the floor with the difference by package (`--profile-dir` keeps the profiles).
`--observe` adds what metrics and tracing cost: the same turns with both off, metrics on,
tracing on (exporting to a fake collector in the wire process) and both, alternated over
`--rounds` rounds (medians), the CPU of one `/metrics` scrape, and what the hooks a turn
calls cost in each mode, measured alone (with both off, the only work they add).

    .venv/bin/python -m bench.overhead [--turns 400] [--streaming partial|off|both] [--profile]
    .venv/bin/python -m bench.overhead --observe [--rounds 3] [--streaming partial]
        [--uvloop]   (the event loop of this process: uvloop, which must be installed)
"""

from __future__ import annotations

import asyncio
import cProfile
import functools
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agents.model import ModelRequest, ModelResponse, Usage
from bench.bare import BareBot
from bench.harness import telegram_daemon, wait_idle
from bench.profiling import difference, tally, where_time_went
from bench.report import Report, parser, percentile
from bench.wire import Wire, pin_apart, use_loopback
from bot.daemon import Daemon
from bot.observe.telemetry import OFF, Telemetry, build_telemetry
from bot.process.logs import trace_id_var
from tests.harness import make_config

PROFILE_DIR = ""  # set from --profile-dir

TEXT = "hello, how are you today?"
TARGET_P50_MS = 5.0
Wait = Callable[[], Awaitable[None]]


async def measure_driver(wire: Wire, n: int = 300) -> float:
    """CPU seconds this process spends per wire round-trip (the benchmark's own share)."""
    await wire.call("ping")
    cpu = time.process_time()
    for _ in range(n):
        await wire.call("ping")
    return (time.process_time() - cpu) / n


async def run_turns(wire: Wire, idle: Wait, turns: int, users: int, first: int = 0) -> None:
    for i in range(first, first + turns):
        await wire.call("dm", user=1000 + i % users, text=TEXT)
        await idle()


async def measure(
    wire: Wire, report: Report, label: str, idle: Wait, turns: int, users: int, warmup: int
) -> list[dict[str, float]]:
    """Warm up, then run `turns` measured turns; adds the figures and returns the turns."""
    await run_turns(wire, idle, warmup, users)
    before = await wire.call("turns")
    cpu, wall = time.process_time(), time.perf_counter()
    await run_turns(wire, idle, turns, users, first=warmup)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    after = await wire.call("turns")
    measured: list[dict[str, float]] = after["turns"]
    to_send = [t["to_send_ms"] for t in measured]
    report.add(
        f"[{label}] update -> sendMessage p50", percentile(to_send, 50), "ms", target=TARGET_P50_MS
    )
    report.add(f"[{label}] update -> sendMessage p99", percentile(to_send, 99), "ms")
    report.add(
        f"[{label}] update -> model request p50",
        percentile([t["to_model_ms"] for t in measured], 50),
        "ms",
    )
    if any(t["to_last_ms"] > t["to_send_ms"] for t in measured):
        to_last = [t["to_last_ms"] for t in measured]
        report.add(f"[{label}] update -> final edit p50", percentile(to_last, 50), "ms")
        report.add(f"[{label}] update -> final edit p99", percentile(to_last, 99), "ms")
    report.add(f"[{label}] CPU per turn, this process (all threads)", cpu / turns * 1000, "ms")
    wire_cpu = after["wire_cpu_total"] - before["wire_cpu_total"]
    report.add(f"[{label}] CPU per turn, the fakes (other process)", wire_cpu / turns * 1000, "ms")
    report.add(f"[{label}] turns per second, one at a time", turns / wall, "turns/s")
    report.note(f"{label}: Bot API calls per turn: {_per_turn(before, after, turns)}")
    return measured


async def profile_perch(
    wire: Wire, idle: Wait, label: str, turns: int, users: int
) -> cProfile.Profile:
    profiler = cProfile.Profile()
    profiler.enable()
    await run_turns(wire, idle, turns, users)
    profiler.disable()
    if PROFILE_DIR:  # for pstats: `--profile-dir DIR`
        name = "".join(c if c.isalnum() else "_" for c in label)
        profiler.dump_stats(str(Path(PROFILE_DIR) / f"{name}.prof"))
    await wire.call("turns")
    print(f"  cProfile of {turns} more turns, {label}:")
    print(where_time_went(profiler, turns), flush=True)
    return profiler


def _per_turn(before: dict[str, Any], after: dict[str, Any], turns: int) -> str:
    parts = []
    for method, count in sorted(after["api_calls"].items()):
        per_turn = (count - before["api_calls"].get(method, 0)) / turns
        if per_turn:
            parts.append(f"{method} {per_turn:.2f}")
    return ", ".join(parts)


def observe_modes(wire: Wire) -> dict[str, dict[str, Any]]:
    metrics = {"metrics.enabled": True, "metrics.listen": "127.0.0.1:0"}
    tracing = {"tracing.enabled": True, "tracing.endpoint": wire.collector_url}
    return {"off": {}, "metrics": metrics, "tracing": tracing, "both": {**metrics, **tracing}}


async def observed_turns(
    wire: Wire, daemon: Daemon, turns: int, users: int, warmup: int
) -> tuple[float, float]:
    """CPU per turn (ms, every thread, the last spans' export included) and the p50."""
    idle = functools.partial(wait_idle, daemon)
    await run_turns(wire, idle, warmup, users)
    tracing = getattr(daemon.parts.telemetry, "tracing", None) if daemon.parts else None
    if tracing is not None:
        await asyncio.to_thread(tracing.flush)
    await wire.call("turns")
    cpu = time.process_time()
    await run_turns(wire, idle, turns, users, first=warmup)
    if tracing is not None:
        await asyncio.to_thread(tracing.flush)
    cpu = time.process_time() - cpu
    measured = (await wire.call("turns"))["turns"]
    return cpu / turns * 1000, percentile([t["to_send_ms"] for t in measured], 50)


async def scrape_cpu(daemon: Daemon) -> float:
    """CPU (ms) of one `GET /metrics`, the store read for the gauges included."""
    import aiohttp

    assert daemon.parts is not None and daemon.parts.metrics is not None
    async with aiohttp.ClientSession() as http:
        cpu = time.process_time()
        for _ in range(20):
            async with http.get(daemon.parts.metrics.url) as response:
                await response.read()
        return (time.process_time() - cpu) / 20 * 1000


def hooks_cpu_us(telemetry: Telemetry, n: int) -> float:
    """µs of CPU (every thread) per turn for what a one-call turn asks of `telemetry`: the
    turn, its trace-id log context, the session note, the agent run, one model call (with
    its first text and usage) and one send; the same calls a turn makes, in a loop. With
    tracing on, the spans' export (encoding, the POST to the collector) is included."""
    observer = telemetry.observer
    request = ModelRequest("claude-sonnet-5-5", [], [])
    response = ModelResponse([], "end_turn", Usage(1200, 40, 0, 0, 0.004), "claude-sonnet-5-5")
    cpu = time.process_time()
    for _ in range(n):
        with telemetry.turn("telegram", "dm", "run") as probe:
            token = trace_id_var.set(probe.trace_id)
            telemetry.conversation("session")
            with observer.agent_run("session", 0) as run:
                with observer.model_call("anthropic", "claude-sonnet-5-5", request) as call:
                    call.first_text()
                    call.finished(response)
                run.finished("ok", response.usage)
            with telemetry.send("telegram"):
                pass
            trace_id_var.reset(token)
            probe.finished("ok")
    tracing = getattr(telemetry, "tracing", None)
    if tracing is not None:
        tracing.flush()
    return (time.process_time() - cpu) / n * 1e6


async def measure_hooks(wire: Wire, report: Report, n: int = 20_000) -> None:
    """The hooks alone, per mode: steadier than the whole turn, whose noise is larger."""
    report.add("[observe off] what a turn asks of telemetry, CPU", hooks_cpu_us(OFF, n), "µs")
    with tempfile.TemporaryDirectory() as tmp:
        for mode, settings in observe_modes(wire).items():
            if mode == "off":
                continue
            config = make_config(Path(tmp), wire.anthropic_url, settings)
            telemetry = build_telemetry(config)
            try:
                per_turn = await asyncio.to_thread(hooks_cpu_us, telemetry, n // 4)
            finally:
                await telemetry.aclose()
            report.add(f"[{mode} on] what a turn asks of telemetry, CPU", per_turn, "µs")


async def measure_observe(
    wire: Wire, report: Report, turns: int, users: int, warmup: int, rounds: int, streaming: str
) -> None:
    """Metrics, tracing and both against both off, `rounds` rounds alternating the modes."""
    modes = observe_modes(wire)
    cpu: dict[str, list[float]] = {mode: [] for mode in modes}
    p50: dict[str, list[float]] = {mode: [] for mode in modes}
    scrapes: list[float] = []
    for _ in range(rounds):
        for mode, settings in modes.items():
            async with telegram_daemon(wire, streaming=streaming, overrides=settings) as daemon:
                per_turn, median = await observed_turns(wire, daemon, turns, users, warmup)
                cpu[mode].append(per_turn)
                p50[mode].append(median)
                if mode == "metrics":
                    scrapes.append(await scrape_cpu(daemon))
    off_cpu, off_p50 = percentile(cpu["off"], 50), percentile(p50["off"], 50)
    report.add("[observe off] CPU per turn (median of rounds)", off_cpu, "ms")
    report.add("[observe off] update -> sendMessage p50", off_p50, "ms")
    for mode in ("metrics", "tracing", "both"):
        mode_cpu, mode_p50 = percentile(cpu[mode], 50), percentile(p50[mode], 50)
        report.add(f"[{mode} on] CPU per turn (median of rounds)", mode_cpu, "ms")
        report.add(f"[{mode} on] CPU per turn minus off", mode_cpu - off_cpu, "ms")
        report.add(f"[{mode} on] p50 minus off", mode_p50 - off_p50, "ms")
    report.add("one GET /metrics scrape, CPU", percentile(scrapes, 50), "ms")
    await measure_hooks(wire, report)
    received = await wire.call("spans")
    report.note(
        f"the collector received {received['spans']} spans in {received['exports']} exports; "
        f"CPU per turn by round: "
        + "; ".join(f"{m} {', '.join(f'{v:.2f}' for v in cpu[m])}" for m in modes)
    )


async def main_async(turns: int, users: int, warmup: int, streaming: str, profile: bool) -> Report:
    report = Report("overhead", "1. Per-turn overhead of Perch (Telegram, zero-latency model)")
    async with Wire() as wire:
        await wire.call("model", delay=0.0)
        driver = await measure_driver(wire)
        perch_p50: dict[str, float] = {}
        profiles: dict[str, cProfile.Profile] = {}
        for mode in ["partial", "off"] if streaming == "both" else [streaming]:
            label = f"Perch, streaming {mode}"
            async with telegram_daemon(wire, streaming=mode) as daemon:
                idle = functools.partial(wait_idle, daemon)
                measured = await measure(wire, report, label, idle, turns, users, warmup)
                perch_p50[mode] = percentile([t["to_send_ms"] for t in measured], 50)
                if profile:
                    profiles[mode] = await profile_perch(wire, idle, label, turns, users)
        async with BareBot(wire) as bare:
            label = "floor: PTB + SDK, no Perch"
            measured = await measure(wire, report, label, bare.wait_idle, turns, users, warmup)
            floor = percentile([t["to_send_ms"] for t in measured], 50)
            if profile:
                bare_profile = await profile_perch(wire, bare.wait_idle, label, turns, users)
                for mode, perch in profiles.items():
                    print(f"  Perch, streaming {mode}:")
                    print(difference(tally(perch)[0], tally(bare_profile)[0], turns), flush=True)
        for mode, p50 in perch_p50.items():
            report.add(f"Perch's own share of the p50 (streaming {mode})", p50 - floor, "ms")
        report.note(
            f"the benchmark's driver costs this process {driver * 1e6:.0f} µs CPU per turn "
            "(one pipe round-trip to the wire process); it is included in the CPU figures"
        )
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--turns", type=int, default=400, help="measured turns (default 400)")
    p.add_argument(
        "--users", type=int, help="DM users in rotation (default: enough for <= 12 turns each)"
    )
    p.add_argument("--warmup", type=int, default=40, help="unmeasured turns first (default 40)")
    p.add_argument("--streaming", choices=["partial", "off", "both"], default="both")
    p.add_argument("--profile", action="store_true", help="add a cProfile pass per mode")
    p.add_argument("--profile-dir", help="with --profile, also save each profile there (pstats)")
    p.add_argument("--pin", action="store_true", help="pin Perch and the fakes to separate CPUs")
    p.add_argument(
        "--observe", action="store_true", help="measure metrics and tracing against both off"
    )
    p.add_argument("--rounds", type=int, default=3, help="--observe: rounds of the 4 modes")
    p.add_argument("--uvloop", action="store_true", help="run Perch and the floor on uvloop")
    args = p.parse_args()
    use_loopback()
    if args.pin:
        print(pin_apart())
    # Sessions stay well under the compaction threshold (50 messages), which would add
    # summary calls to the model in the middle of the measurement.
    users = args.users or -(-(args.warmup + args.turns) // 12)
    global PROFILE_DIR
    PROFILE_DIR = args.profile_dir or ""
    if PROFILE_DIR:
        Path(PROFILE_DIR).mkdir(parents=True, exist_ok=True)
    if args.observe:
        streaming = "partial" if args.streaming == "both" else args.streaming
        run = observe_async(args.turns, users, args.warmup, args.rounds, streaming)
    else:
        run = main_async(args.turns, users, args.warmup, args.streaming, args.profile)
    if args.uvloop:
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            report = runner.run(run)
        report.note(f"event loop: uvloop {uvloop.__version__}")
    else:
        report = asyncio.run(run)
    report.save(args.json)


async def observe_async(turns: int, users: int, warmup: int, rounds: int, streaming: str) -> Report:
    report = Report(
        "overhead", "1b. What metrics and tracing cost per turn (Telegram, zero-latency model)"
    )
    async with Wire() as wire:
        await wire.call("model", delay=0.0)
        await measure_observe(wire, report, turns, users, warmup, rounds, streaming)
    return report


if __name__ == "__main__":
    main()
