"""Runs every benchmark, each in a fresh process, and prints one table of the results.

`python -m bench.run_all` (what `make bench` runs) runs `bench.overhead`, `bench.throughput`,
`bench.group_flood`, `bench.memory`, `bench.sqlite`, `bench.text`, `bench.sessions`,
`bench.history`, `bench.botapi`, `bench.skills`, `bench.cache_replay` and `bench.recall` one after
the other,
collects their figures through `--json`, and ends with a Markdown table of every figure and target, ready
to paste into bench/README.md. It fails (exit 1) when a benchmark fails, not when a target
is missed: the table says that.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import describe_machine
from bench.wire import ROOT, use_loopback

BENCHMARKS = [
    "overhead",
    "throughput",
    "group_flood",
    "memory",
    "sqlite",
    "text",
    "sessions",
    "history",
    "botapi",
    "skills",
    "cache_replay",
    "recall",
]
TIMEOUT_S = 300


def run(name: str, folder: Path) -> dict[str, Any] | None:
    out = folder / f"{name}.json"
    began = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", "--json", str(out)],
            cwd=ROOT,
            env=use_loopback(),
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"!! bench.{name} did not finish within {TIMEOUT_S} s", flush=True)
        return None
    print(f"   (bench.{name} took {time.perf_counter() - began:.0f} s)\n", flush=True)
    if done.returncode != 0 or not out.exists():
        print(f"!! bench.{name} failed with exit code {done.returncode}", flush=True)
        return None
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [f"Machine: {describe_machine()}", ""]
    lines += ["| Benchmark | Figure | Value | Target |", "|---|---|---:|---|"]
    for result in results:
        for figure in result["figures"]:
            value = figure["value"]
            shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
            target = ""
            if figure["target"] is not None:
                sign = ">=" if figure["higher_is_better"] else "<"
                met = (
                    value >= figure["target"]
                    if figure["higher_is_better"]
                    else value < figure["target"]
                )
                target = f"{sign} {figure['target']:g}: {'met' if met else '**missed**'}"
            lines.append(
                f"| {result['benchmark']} | {figure['name']} | {shown} {figure['unit']} "
                f"| {target} |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help=f"comma-separated subset of {','.join(BENCHMARKS)}")
    p.add_argument("--markdown", metavar="PATH", help="also write the table to PATH")
    args = p.parse_args()
    names = args.only.split(",") if args.only else BENCHMARKS
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    results, failed = [], []
    with tempfile.TemporaryDirectory(prefix="perch-bench-") as tmp:
        for name in names:
            result = run(name, Path(tmp))
            if result is None:
                failed.append(name)
            else:
                results.append(result)
    table = markdown(results)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
