"""What every benchmark prints: the machine it ran on, and its figures against the targets.

`machine()` describes the host (CPU model, cores, memory, Python, OS). A `Report` collects
named figures with units and optional targets, prints them as it goes, and writes them as
JSON (`--json PATH`) for `bench.run_all`'s table. `percentile` is nearest-rank.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path


def machine() -> dict[str, str]:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or cpu
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB RAM"
                break
    except OSError:
        pass
    system = platform.platform(terse=True)
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                name = line.split("=", 1)[1].strip().strip('"')
                system = f"{name}, Linux {platform.release()}"
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": f"{usable} usable of {os.cpu_count()}",
        "memory": memory,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": system,
    }


def describe_machine() -> str:
    m = machine()
    return f"{m['cpu']}, {m['cores']} cores, {m['memory']}; {m['python']}; {m['os']}"


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank `p`th percentile (0 < p <= 100) of `values`."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(slots=True)
class Figure:
    name: str
    value: float
    unit: str
    target: float | None = None
    higher_is_better: bool = False

    @property
    def meets_target(self) -> bool | None:
        if self.target is None:
            return None
        return self.value >= self.target if self.higher_is_better else self.value < self.target

    def line(self) -> str:
        text = f"  {self.name:<52} {self.value:>10.{_digits(self.value)}f} {self.unit}"
        met = self.meets_target
        if met is not None:
            sign = ">=" if self.higher_is_better else "<"
            text += f"   (target {sign} {self.target:g} {self.unit}: {'met' if met else 'MISSED'})"
        return text


def _digits(value: float) -> int:
    magnitude = abs(value)
    if magnitude >= 100 or float(value).is_integer():
        return 0
    if magnitude >= 10:
        return 1
    if magnitude >= 1:
        return 2
    return 3


class Report:
    """The figures of one benchmark; `add` prints each as it is measured."""

    def __init__(self, benchmark: str, title: str) -> None:
        self.benchmark = benchmark
        self.title = title
        self.figures: list[Figure] = []
        self.notes: list[str] = []
        print(f"== {title}")
        print(f"   on {describe_machine()}")
        sys.stdout.flush()

    def add(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        target: float | None = None,
        higher_is_better: bool = False,
    ) -> Figure:
        figure = Figure(name, float(value), unit, target, higher_is_better)
        self.figures.append(figure)
        print(figure.line(), flush=True)
        return figure

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  - {text}", flush=True)

    def save(self, path: str | None) -> None:
        if not path:
            return
        data = {
            "benchmark": self.benchmark,
            "title": self.title,
            "machine": machine(),
            "figures": [asdict(f) for f in self.figures],
            "notes": self.notes,
        }
        Path(path).write_text(json.dumps(data, indent=1))


def parser(description: str) -> argparse.ArgumentParser:
    """The argument parser every benchmark starts from (`--json PATH`)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", help="also write the figures to PATH as JSON")
    return p
