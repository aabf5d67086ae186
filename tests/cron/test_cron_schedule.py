"""Schedule parsing and next-run math with a controlled clock: at, every, cron, timezones, DST."""

from __future__ import annotations

import contextlib
import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cron.schedule import Schedule, load_schedule, parse_cron, parse_schedule

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC).timestamp()


def ts(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=UTC).timestamp()


def runs(schedule: Schedule, start: float, n: int, anchor: float = NOW) -> list[datetime]:
    out: list[datetime] = []
    t = start
    for _ in range(n):
        nxt = schedule.next_after(t, anchor=anchor)
        assert nxt is not None and nxt > t
        out.append(datetime.fromtimestamp(nxt, UTC))
        t = nxt
    return out


def cron(expr: str, tz: str = "UTC") -> Schedule:
    return parse_schedule("cron", expr, tz, now=NOW)


# -- at ------------------------------------------------------------------------------------


def test_at_without_offset_is_read_in_the_jobs_timezone() -> None:
    s = parse_schedule("at", "2025-03-02T09:00", "Europe/Berlin", now=NOW)
    assert s.at_time == ts(2025, 3, 2, 8, 0)
    assert s.expr == "2025-03-02T09:00:00+01:00"
    assert s.describe() == "at 2025-03-02 09:00 CET"


def test_at_with_offset_or_z_keeps_its_instant() -> None:
    with_offset = parse_schedule("at", "2025-03-02T09:00:00-05:00", "Europe/Berlin", now=NOW)
    assert with_offset.at_time == ts(2025, 3, 2, 14, 0)
    zulu = parse_schedule("at", "2025-03-02T09:00:00Z", "UTC", now=NOW)
    assert zulu.at_time == ts(2025, 3, 2, 9, 0)


def test_at_plus_duration_counts_from_now() -> None:
    assert parse_schedule("at", "+20m", "UTC", now=NOW).at_time == NOW + 1200


def test_at_runs_once_then_never() -> None:
    s = parse_schedule("at", "+1h", "UTC", now=NOW)
    assert s.next_after(NOW, anchor=NOW) == NOW + 3600
    assert s.next_after(NOW + 3600, anchor=NOW) is None
    assert s.one_shot


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("2025-02-28T09:00", "in the past"),
        ("2025-03-02", "no time of day"),
        ("tomorrow 9am", "not an ISO 8601 time"),
        ("+soon", r"after '\+' write a duration"),
        ("", "empty"),
    ],
)
def test_bad_at_is_refused_with_what_to_write(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_schedule("at", expr, "UTC", now=NOW)


def test_unknown_timezone_is_refused() -> None:
    with pytest.raises(ValueError, match="IANA name"):
        parse_schedule("at", "+1h", "Mars/Olympus", now=NOW)


# -- every ---------------------------------------------------------------------------------


def test_every_runs_on_a_grid_anchored_at_creation() -> None:
    s = parse_schedule("every", "10m", "UTC", now=NOW)
    assert s.next_after(NOW, anchor=NOW) == NOW + 600
    # Asked at any moment, the next run stays on the creation grid (no drift).
    assert s.next_after(NOW + 601, anchor=NOW) == NOW + 1200
    assert s.next_after(NOW + 1200, anchor=NOW) == NOW + 1800
    assert s.describe() == "every 10m"


def test_every_below_the_minimum_or_nonsense_is_refused() -> None:
    with pytest.raises(ValueError, match="too often"):
        parse_schedule("every", "30s", "UTC", now=NOW, min_every=60)
    with pytest.raises(ValueError, match="too often"):
        parse_schedule("every", "0", "UTC", now=NOW)
    with pytest.raises(ValueError, match="not a duration"):
        parse_schedule("every", "fortnightly", "UTC", now=NOW)


def test_missed_runs_of_an_every_job_are_counted_for_coalescing() -> None:
    s = parse_schedule("every", "1h", "UTC", now=NOW)
    assert s.count_between(NOW + 3600, NOW + 5 * 3600 + 10, anchor=NOW) == 5
    assert s.count_between(NOW + 3600, NOW + 3600, anchor=NOW) == 1


# -- cron ----------------------------------------------------------------------------------


def test_weekday_numbers_are_crontabs_monday_is_one() -> None:
    # 2025-03-01 is a Saturday: 1-5 must mean Monday..Friday (APScheduler 3 would say Tue-Sat).
    got = runs(cron("0 9 * * 1-5"), NOW, 6)
    assert [d.strftime("%a %H:%M") for d in got] == [
        "Mon 09:00",
        "Tue 09:00",
        "Wed 09:00",
        "Thu 09:00",
        "Fri 09:00",
        "Mon 09:00",
    ]


@pytest.mark.parametrize("sunday", ["0", "7", "sun", "SUN"])
def test_sunday_is_zero_seven_or_its_name(sunday: str) -> None:
    assert runs(cron(f"30 8 * * {sunday}"), NOW, 1)[0] == datetime(2025, 3, 2, 8, 30, tzinfo=UTC)


def test_steps_lists_ranges_and_month_names() -> None:
    assert [d.minute for d in runs(cron("*/15 * * * *"), NOW, 4)] == [15, 30, 45, 0]
    assert [d.hour for d in runs(cron("0 9,13-14 * * *"), NOW, 3)] == [13, 14, 9]
    assert runs(cron("0 0 1 jun *"), NOW, 1)[0] == datetime(2025, 6, 1, tzinfo=UTC)
    assert runs(cron("5/20 * * * *"), NOW, 3)[-1].minute == 45


def test_day_of_month_or_day_of_week_when_both_are_given() -> None:
    # Vixie cron: the 15th OR any Monday (2025-03-03 is a Monday).
    got = runs(cron("0 0 15 * 1"), NOW, 3)
    assert [d.day for d in got] == [3, 10, 15]
    # With a '*' at the start of one of them, both must match: only Mondays.
    got = runs(cron("0 0 */1 * 1"), NOW, 2)
    assert [d.day for d in got] == [3, 10]


def test_macros_expand() -> None:
    assert runs(cron("@daily"), NOW, 1)[0] == datetime(2025, 3, 2, tzinfo=UTC)
    assert runs(cron("@hourly"), NOW, 1)[0] == datetime(2025, 3, 1, 13, tzinfo=UTC)
    assert runs(cron("@weekly"), NOW, 1)[0].strftime("%a") == "Sun"


def test_cron_uses_its_own_timezone() -> None:
    tokyo = runs(cron("0 9 * * *", "Asia/Tokyo"), NOW, 1)[0]
    assert tokyo == datetime(2025, 3, 2, 0, 0, tzinfo=UTC)
    assert cron("0 9 * * *", "Asia/Tokyo").describe() == "cron '0 9 * * *' (Asia/Tokyo)"


def test_leap_day_is_found_years_ahead() -> None:
    s = cron("0 0 29 2 *")
    assert s.next_after(ts(2097, 1, 1), anchor=NOW) == ts(2104, 2, 29)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 9 * *", "has 4 fields"),
        ("61 * * * *", r"field 1 \(minute\): 61 is out of range 0-59"),
        ("0 25 * * *", r"field 2 \(hour\)"),
        ("0 0 0 * *", r"field 3 \(day-of-month\)"),
        ("0 0 * 13 *", r"field 4 \(month\)"),
        ("0 0 * * 8", r"field 5 \(day-of-week\)"),
        ("0 0 * * mo", "not a number or a name"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "step"),
        ("0 0 30 2 *", "never matches"),
        ("@reboot", "unknown cron macro"),
    ],
)
def test_bad_cron_names_the_field(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cron(expr)


# -- DST -----------------------------------------------------------------------------------


def test_daily_job_keeps_local_time_across_spring_forward() -> None:
    s = cron("0 9 * * *", "Europe/Berlin")
    got = runs(s, ts(2025, 3, 29, 0, 0), 2)
    # 09:00 CET is 08:00 UTC; after the change 09:00 CEST is 07:00 UTC.
    assert got == [datetime(2025, 3, 29, 8, tzinfo=UTC), datetime(2025, 3, 30, 7, tzinfo=UTC)]


def test_time_skipped_by_spring_forward_runs_at_the_jump() -> None:
    # Debian cron's rule (cronsim's): the skipped 02:30 runs as soon as the clock is at 03:00.
    got = runs(cron("30 2 * * *", "Europe/Berlin"), ts(2025, 3, 29, 12, 0), 2)
    assert [d.astimezone(BERLIN).strftime("%d %H:%M") for d in got] == ["30 03:00", "31 02:30"]


def test_fixed_time_in_the_repeated_hour_runs_once_at_fall_back() -> None:
    got = runs(cron("30 2 * * *", "Europe/Berlin"), ts(2025, 10, 25, 12, 0), 2)
    assert got[0] == datetime(2025, 10, 26, 0, 30, tzinfo=UTC)  # 02:30 CEST, first pass
    assert got[1] == datetime(2025, 10, 27, 1, 30, tzinfo=UTC)  # next day, 02:30 CET


def test_hourly_job_stays_hourly_through_fall_back() -> None:
    got = runs(cron("0 * * * *", "Europe/Berlin"), ts(2025, 10, 25, 22, 0), 6)
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(got))
    # 02:00 local happens twice that night and both runs are there.
    assert [d.astimezone(BERLIN).hour for d in got] == [1, 2, 2, 3, 4, 5]


def test_new_york_changes_on_its_own_date() -> None:
    got = runs(cron("0 9 * * *", "America/New_York"), ts(2025, 3, 8, 0, 0), 2)
    assert [d.hour for d in got] == [14, 13]  # EST then EDT


# -- properties ----------------------------------------------------------------------------

_MINUTES = st.lists(st.integers(0, 59), min_size=1, max_size=4, unique=True)
_HOURS = st.one_of(st.just("*"), st.lists(st.integers(0, 23), min_size=1, max_size=3, unique=True))
_MOMENT = st.integers(
    int(ts(2024, 1, 1)),
    int(ts(2026, 12, 31)),
)


def _field(values: list[int] | str) -> str:
    return values if isinstance(values, str) else ",".join(map(str, values))


@settings(max_examples=120)
@given(_MINUTES, _HOURS, _MOMENT, st.sampled_from(["UTC", "Asia/Kolkata"]))
def test_next_run_is_the_first_matching_minute_after_now(
    minutes: list[int], hours: list[int] | str, after: int, tz: str
) -> None:
    """In zones without DST, the answer equals a brute-force walk over the minutes."""
    expr = f"{_field(minutes)} {_field(hours)} * * *"
    got = cron(expr, tz).next_after(after, anchor=0)
    zone = ZoneInfo(tz)
    t = after - after % 60 + 60
    hour_set = set(range(24)) if hours == "*" else set(hours)
    while True:
        local = datetime.fromtimestamp(t, zone)
        if local.minute in minutes and local.hour in hour_set:
            break
        t += 60
    assert got == t


@settings(max_examples=60)
@given(_MINUTES, _HOURS, _MOMENT)
def test_runs_in_a_dst_zone_always_move_forward(
    minutes: list[int], hours: list[int] | str, after: int
) -> None:
    s = cron(f"{_field(minutes)} {_field(hours)} * * *", "Europe/Berlin")
    t = float(after)
    for _ in range(5):
        nxt = s.next_after(t, anchor=0)
        assert nxt is not None and t < nxt <= t + 2 * 86400
        t = nxt


@settings(max_examples=200)
@given(st.text(max_size=30))
def test_any_text_parses_or_fails_with_a_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        parse_cron(text)


def test_stored_schedules_load_back() -> None:
    for s in (
        parse_schedule("at", "+1h", "Europe/Berlin", now=NOW),
        parse_schedule("every", "2h", "UTC", now=NOW),
        cron("0 9 * * 1-5", "Europe/Berlin"),
    ):
        assert load_schedule(s.kind, s.expr, s.tz) == s
    with pytest.raises(ValueError):
        load_schedule("sometimes", "x", "UTC")
