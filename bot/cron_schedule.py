"""Cron job schedules: parsing `at` / `every` / `cron` and computing the next run. Pure.

`parse_schedule(kind, expr, tz, now=...)` validates what a person or the model typed and
returns a normalised `Schedule`; `load_schedule` reads one back from SQLite.
`Schedule.next_after(t, anchor=created_at)` is the first run strictly after `t` (epoch
seconds), or None when there is none (a one-shot that has passed). Time comes in as an
argument, so every rule is testable with a controlled clock.

Decisions:
- `at` is an ISO 8601 time; without an offset it is read in the job's `tz` (a wall time that
  a DST change skips is read with the offset before the change). `+20m` means "20 minutes
  from now". Stored normalised with its offset. A time in the past is refused.
- `every` is a duration (`45s`, `10m`, `2h`, `1d`) counted from the job's creation: runs fall
  on `created_at + k * interval`, so they never drift.
- `cron` is a standard 5-field crontab (minute hour day-of-month month day-of-week) or a
  macro (`@hourly`, `@daily`/`@midnight`, `@weekly`, `@monthly`, `@yearly`/`@annually`),
  evaluated in the job's own IANA `tz`. Day-of-week numbers are crontab's: 0 and 7 are
  Sunday, 1 is Monday. When both day fields are restricted a day matches either (Vixie cron).
- DST: the math walks local wall-clock times, so `0 9 * * *` stays at 09:00 local across a
  change. A time skipped by spring-forward runs as if the clock had not jumped (02:30 ->
  03:30). In an hour repeated by fall-back, a job with fixed hours runs once (the first
  pass); a job whose hour field starts with `*` runs in both passes, so hourly jobs stay
  hourly. APScheduler 3's `CronTrigger` is not used for the math: at a fall-back it returns
  the same or earlier times again (measured with 3.11.3), and it numbers weekdays from Monday.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.config import parse_duration

ScheduleKind = Literal["at", "every", "cron"]
KINDS: tuple[ScheduleKind, ...] = ("at", "every", "cron")

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
CRON_FORM = "5 fields: minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5'"
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_SEARCH_DAYS = 366 * 9  # Feb 29 can be 8 years away (2096 -> 2104)


def zone(tz: str) -> ZoneInfo:
    """The IANA zone `tz`, or ValueError saying how to name one."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {tz!r}; use an IANA name such as Europe/Berlin or UTC"
        ) from None


def format_time(ts: float, tz: str) -> str:
    """`2025-03-01 09:00 CET` (seconds shown only when not zero)."""
    local = datetime.fromtimestamp(ts, zone(tz))
    shape = "%Y-%m-%d %H:%M:%S %Z" if local.second else "%Y-%m-%d %H:%M %Z"
    return local.strftime(shape)


# -- crontab expressions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # index + low is the value


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day-of-month", 1, 31),
    _Field("month", 1, 12, tuple(_MONTHS)),
    _Field("day-of-week", 0, 7, tuple(_WEEKDAYS)),
)


def _field_value(token: str, field: _Field, position: int) -> int:
    lowered = token.lower()
    if field.names and lowered in field.names:
        return field.names.index(lowered) + field.low
    if not token.isdigit():
        hint = f" or a name ({', '.join(field.names)})" if field.names else ""
        raise ValueError(
            f"cron field {position} ({field.name}): {token!r} is not a number{hint}; "
            f"expected {CRON_FORM}"
        )
    value = int(token)
    if not field.low <= value <= field.high:
        raise ValueError(
            f"cron field {position} ({field.name}): {value} is out of range "
            f"{field.low}-{field.high}"
        )
    return value


def _parse_field(text: str, field: _Field, position: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise ValueError(f"cron field {position} ({field.name}): empty list item in {text!r}")
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise ValueError(
                    f"cron field {position} ({field.name}): step {step_text!r} must be a "
                    "whole number >= 1"
                )
            step = int(step_text)
        if base == "*":
            start, end = field.low, field.high
        elif "-" in base:
            first, _, last = base.partition("-")
            start = _field_value(first, field, position)
            end = _field_value(last, field, position)
            if start > end:
                raise ValueError(
                    f"cron field {position} ({field.name}): range {base!r} runs backwards; "
                    "write the smaller value first"
                )
        else:
            start = _field_value(base, field, position)
            end = field.high if slash else start
        values.update(range(start, end + 1, step))
    if field.name == "day-of-week":
        values = {v % 7 for v in values}
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed 5-field crontab expression (weekdays 0-6, 0 = Sunday)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_star: bool  # the day-of-month field starts with '*'
    weekday_star: bool
    hour_star: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.weekday() + 1) % 7 in self.weekdays
        if self.day_star or self.weekday_star:
            return in_month and in_week
        return in_month or in_week

    def next_after(self, after: float, tz: ZoneInfo) -> float | None:
        """The first run strictly after `after` (epoch seconds), or None if none in 9 years."""
        local = datetime.fromtimestamp(after, tz).replace(tzinfo=None)
        # Fall-back repeats up to a few hours of wall time: start looking a little earlier
        # in wall time and let the instant comparison decide.
        day = (local - timedelta(hours=4)).date()
        for _ in range(_SEARCH_DAYS):
            if self.matches_day(day):
                found = self._first_on(day, tz, after)
                if found is not None:
                    return found  # a run on a later day is never earlier than this one
            day += timedelta(days=1)
        return None

    def _first_on(self, day: date, tz: ZoneInfo, after: float) -> float | None:
        """The earliest run on local `day` strictly after `after`, if any."""
        midnight = datetime(day.year, day.month, day.day, tzinfo=tz)
        if midnight.utcoffset() == (midnight + timedelta(days=1)).utcoffset():
            # No DST change on this day: wall time and elapsed time agree, runs are in order.
            base = midnight.timestamp()
            last_minute = self.minutes[-1] * 60
            for hour in self.hours:
                start = base + hour * 3600
                if start + last_minute <= after:
                    continue
                for minute in self.minutes:
                    if start + minute * 60 > after:
                        return start + minute * 60
            return None
        # A DST change today: wall times may be skipped or repeated, and their instants
        # are not in wall-clock order. Collect them all and take the smallest.
        found: list[float] = []
        for hour in self.hours:
            for minute in self.minutes:
                naive = datetime(day.year, day.month, day.day, hour, minute)
                first = naive.replace(tzinfo=tz, fold=0)
                found.append(first.timestamp())  # a skipped wall time maps past the gap
                if not self.hour_star:
                    continue
                second = naive.replace(tzinfo=tz, fold=1)
                if second.utcoffset() != first.utcoffset() and _exists(second, naive, tz):
                    found.append(second.timestamp())  # the repeated hour's second pass
        later = [t for t in found if t > after]
        return min(later) if later else None


def _exists(moment: datetime, naive: datetime, tz: ZoneInfo) -> bool:
    back = datetime.fromtimestamp(moment.timestamp(), tz).replace(tzinfo=None)
    return back == naive


@functools.lru_cache(maxsize=512)
def parse_cron(text: str) -> CronExpr:
    """Parse a crontab expression or macro; ValueError names the field that is wrong."""
    normalised = " ".join(text.split())
    if normalised.startswith("@"):
        expanded = MACROS.get(normalised.lower())
        if expanded is None:
            raise ValueError(
                f"unknown cron macro {normalised!r}; use one of {', '.join(MACROS)} or {CRON_FORM}"
            )
        fields = expanded.split()
    else:
        fields = normalised.split(" ") if normalised else []
    if len(fields) != 5:
        raise ValueError(f"cron expression {text!r} has {len(fields)} fields; expected {CRON_FORM}")
    parsed = [
        _parse_field(f, spec, i + 1)
        for i, (f, spec) in enumerate(zip(fields, _FIELDS, strict=True))
    ]
    expr = CronExpr(
        text=normalised,
        minutes=tuple(sorted(parsed[0])),
        hours=tuple(sorted(parsed[1])),
        days=parsed[2],
        months=parsed[3],
        weekdays=parsed[4],
        day_star=fields[2].startswith("*"),
        weekday_star=fields[4].startswith("*"),
        hour_star=fields[1].startswith("*"),
    )
    if expr.next_after(datetime(2000, 1, 1, tzinfo=UTC).timestamp(), ZoneInfo("UTC")) is None:
        raise ValueError(f"cron expression {text!r} never matches a real date (e.g. 30 February)")
    return expr


# -- schedules -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job runs. `expr` is normalised: an ISO time with offset, a duration, a crontab."""

    kind: ScheduleKind
    expr: str
    tz: str

    @property
    def one_shot(self) -> bool:
        return self.kind == "at"

    @property
    def at_time(self) -> float:
        """Epoch seconds of an `at` schedule."""
        return datetime.fromisoformat(self.expr).timestamp()

    @property
    def interval(self) -> float:
        """Seconds between runs of an `every` schedule."""
        return parse_duration(self.expr)

    def next_after(self, after: float, *, anchor: float) -> float | None:
        """The first run strictly after `after`; `anchor` is the job's creation time."""
        if self.kind == "at":
            at = self.at_time
            return at if at > after else None
        if self.kind == "every":
            step = self.interval
            if after < anchor:
                return anchor + step
            periods = math.floor((after - anchor) / step) + 1
            return anchor + periods * step
        return parse_cron(self.expr).next_after(after, zone(self.tz))

    def count_between(self, start: float, end: float, *, anchor: float, cap: int = 1000) -> int:
        """How many runs fall in [start, end] (at most `cap`): what a coalesced run stands for."""
        if start > end:
            return 0
        count, t = 1, start
        while count < cap:
            nxt = self.next_after(t, anchor=anchor)
            if nxt is None or nxt > end:
                break
            count, t = count + 1, nxt
        return count

    def describe(self) -> str:
        if self.kind == "at":
            return f"at {format_time(self.at_time, self.tz)}"
        if self.kind == "every":
            return f"every {self.expr}"
        return f"cron '{self.expr}' ({self.tz})"


def load_schedule(kind: str, expr: str, tz: str) -> Schedule:
    """A schedule as stored; ValueError if the row is unreadable."""
    if kind not in KINDS:
        raise ValueError(f"unknown schedule kind {kind!r}; expected at, every or cron")
    zone(tz)
    schedule = Schedule(kind, expr, tz)
    if kind == "at":
        _ = schedule.at_time
    elif kind == "every":
        _ = schedule.interval
    else:
        parse_cron(expr)
    return schedule


def parse_schedule(
    kind: str, expr: str, tz: str, *, now: float, min_every: float = 1.0
) -> Schedule:
    """Validate and normalise a schedule someone typed. ValueError says what to write."""
    if kind not in KINDS:
        raise ValueError(f"unknown schedule kind {kind!r}; use at, every or cron")
    zone(tz)
    text = expr.strip()
    if not text:
        raise ValueError(f"the {kind} schedule is empty")
    if kind == "at":
        at = _parse_at(text, tz, now)
        if at <= now:
            raise ValueError(
                f"at {text!r} is in the past (it is now {format_time(now, tz)}); give a future "
                "time, or +20m for 20 minutes from now"
            )
        iso = datetime.fromtimestamp(at, zone(tz)).isoformat()  # microseconds only if any
        return Schedule("at", iso, tz)
    if kind == "every":
        try:
            seconds = parse_duration(text)
        except ValueError as exc:
            if "needs a unit" in str(exc):
                raise ValueError(f"every {text!r}: {exc}") from None
            raise ValueError(
                f"every {text!r} is not a duration; write e.g. 45s, 10m, 2h or 1d"
            ) from None
        if seconds < min_every or seconds <= 0:
            raise ValueError(
                f"every {text!r} is too often; the shortest interval is {min_every:g} s"
                + (" (a job that must run more often says allow_fast)" if min_every >= 60 else "")
            )
        return Schedule("every", text.replace(" ", ""), tz)
    return Schedule("cron", parse_cron(text).text, tz)


def _parse_at(text: str, tz: str, now: float) -> float:
    if text.startswith("+"):
        try:
            return now + parse_duration(text[1:])
        except ValueError:
            raise ValueError(f"at {text!r}: after '+' write a duration such as 20m or 2h") from None
    if "T" not in text.upper() and " " not in text:
        raise ValueError(
            f"at {text!r} has no time of day; write e.g. 2025-03-01T09:00 (read in {tz}) or "
            "2025-03-01T09:00:00+01:00"
        )
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"at {text!r} is not an ISO 8601 time; write e.g. 2025-03-01T09:00 (read in "
            f"{tz}), 2025-03-01T09:00:00+01:00, or +20m"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone(tz))
    return moment.timestamp()
