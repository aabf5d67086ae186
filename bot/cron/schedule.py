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
  Parsing is ours (one-line errors naming the field; only the standard syntax is accepted);
  the arithmetic is `cronsim`'s, which follows Debian cron.
- DST (Debian cron's rules, as cronsim implements them): `0 9 * * *` stays at 09:00 local
  across a change. For a job with fixed minutes and hours, a time skipped by spring-forward
  runs at the moment of the jump (02:30 -> 03:00), and a time in the hour repeated by
  fall-back runs once (the first pass). A job whose minute or hour field starts with `*`
  follows elapsed time instead: skipped wall times do not run and repeated ones run in both
  passes, so hourly jobs stay hourly. APScheduler 3's `CronTrigger` is not used for the math: at a
  fall-back it returns the same or earlier times again (measured with 3.11.3), and it
  numbers weekdays from Monday.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from bot.config.agent import parse_duration

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


def _check_field(text: str, field: _Field, position: int) -> None:
    """ValueError naming the field unless `text` is a valid standard crontab field."""
    for part in text.split(","):
        if not part:
            raise ValueError(f"cron field {position} ({field.name}): empty list item in {text!r}")
        base, slash, step_text = part.partition("/")
        if slash and (not step_text.isdigit() or int(step_text) == 0):
            raise ValueError(
                f"cron field {position} ({field.name}): step {step_text!r} must be a "
                "whole number >= 1"
            )
        if base == "*":
            continue
        if "-" in base:
            first, _, last = base.partition("-")
            if _field_value(first, field, position) > _field_value(last, field, position):
                raise ValueError(
                    f"cron field {position} ({field.name}): range {base!r} runs backwards; "
                    "write the smaller value first"
                )
        else:
            _field_value(base, field, position)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A checked crontab expression: `text` as written (normalised), `fields` its 5 fields."""

    text: str
    fields: str

    def next_after(self, after: float, tz: ZoneInfo) -> float | None:
        """The first run strictly after `after` (epoch seconds), or None if none in 50 years."""
        start = datetime.fromtimestamp(after, tz)
        try:
            return next(CronSim(self.fields, start)).timestamp()
        except StopIteration:
            return None


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
    for i, (field, spec) in enumerate(zip(fields, _FIELDS, strict=True)):
        _check_field(field, spec, i + 1)
    expr = CronExpr(text=normalised, fields=" ".join(fields))
    never = f"cron expression {text!r} never matches a real date (e.g. 30 February)"
    try:
        first = expr.next_after(datetime(2000, 1, 1, tzinfo=UTC).timestamp(), ZoneInfo("UTC"))
    except CronSimError:
        raise ValueError(never) from None
    if first is None:
        raise ValueError(never)
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
