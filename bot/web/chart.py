"""Bar charts of the usage ledger as plain geometry, for the Usage page's server-drawn SVG.

`stacked_days(days, rows, measure)` gives one bar per day, stacked by model, scaled to a
rounded axis maximum with its grid lines; the template only draws the rectangles. Pure: a
table of cases tests it. Colours are CSS classes (`series-0`..), so the page's stylesheet
(and its dark theme) colours them; no inline style is needed under the page's CSP.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.store.rows import UsageDay

WIDTH, HEIGHT = 720.0, 240.0
LEFT, RIGHT, TOP, BOTTOM = 56.0, 8.0, 10.0, 26.0  # room for the axis labels
SERIES = 8  # colour classes; a ninth model shares the first colour
GRID_LINES = 4

Measure = Callable[[UsageDay], float]


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: int
    title: str  # the tooltip: day, model and value


@dataclass(frozen=True, slots=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True, slots=True)
class DayLabel:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: float
    height: float
    bars: list[Bar]
    ticks: list[Tick]
    days: list[DayLabel]
    legend: list[tuple[int, str]]  # (series, model)
    total: str

    @property
    def empty(self) -> bool:
        return not self.bars


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 times a power of ten at or above `value` (1 for 0)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power * (1 + 1e-9):
            return step * power
    return 10 * power


def tokens_label(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    if value >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.3g}"


def cost_label(value: float) -> str:
    return f"${value:.2f}" if value >= 0.01 or value == 0 else f"${value:.2g}"


def stacked_days(
    days: Sequence[str],
    rows: Sequence[UsageDay],
    measure: Measure,
    label: Callable[[float], str],
) -> Chart:
    """One bar per day of `days` (in order), stacked by model (models sorted by name)."""
    models = sorted({r.model or "-" for r in rows})
    series = {model: i % SERIES for i, model in enumerate(models)}
    per_day: dict[str, list[tuple[str, float]]] = {day: [] for day in days}
    for row in rows:
        value = measure(row)
        if row.day in per_day and value > 0:
            per_day[row.day].append((row.model or "-", value))
    top = nice_ceiling(max((sum(v for _, v in p) for p in per_day.values()), default=0.0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(days), 1)
    gap = min(slot * 0.2, 6.0)
    bars: list[Bar] = []
    for i, day in enumerate(days):
        base = 0.0
        for model, value in sorted(per_day[day], key=lambda mv: mv[0]):
            height = value / top * plot_h
            bars.append(
                Bar(
                    x=round(LEFT + i * slot + gap / 2, 2),
                    y=round(TOP + plot_h - (base + height), 2),
                    width=round(slot - gap, 2),
                    height=round(max(height, 0.5), 2),
                    series=series[model],
                    title=f"{day} · {model}: {label(value)}",
                )
            )
            base += height
    ticks = [
        Tick(round(TOP + plot_h - plot_h * k / GRID_LINES, 2), label(top * k / GRID_LINES))
        for k in range(GRID_LINES + 1)
    ]
    every = max(1, math.ceil(len(days) / 6))
    labels = [
        DayLabel(round(LEFT + i * slot + slot / 2, 2), day[5:])
        for i, day in enumerate(days)
        if (len(days) - 1 - i) % every == 0
    ]
    total = sum(measure(r) for r in rows if r.day in per_day)
    return Chart(WIDTH, HEIGHT, bars, ticks, labels, [(series[m], m) for m in models], label(total))
