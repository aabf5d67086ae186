"""The plumbing every adapter shares: per-chat ordering, retries, reconnect backoff."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels.ordering import ChatLocks
from channels.reconnect import Backoff, connect_until_up
from channels.retry import RetryPolicy, call_with_retries

pytestmark = pytest.mark.timeout(10)


class Flaky(Exception):
    def __init__(self, wait: float | None = None) -> None:
        super().__init__("flaky")
        self.wait = wait


class Refused(Exception):
    pass


async def test_one_chat_is_served_in_arrival_order_while_others_run_alongside() -> None:
    locks = ChatLocks()
    log: list[str] = []
    release = asyncio.Event()

    async def send(key: str, name: str, hold: bool = False) -> None:
        async with locks.hold(key):
            log.append(f"{name} in")
            if hold:
                await release.wait()
            log.append(f"{name} out")

    first = asyncio.create_task(send("a", "a1", hold=True))
    await asyncio.sleep(0)
    second = asyncio.create_task(send("a", "a2"))
    other = asyncio.create_task(send("b", "b1"))
    await other  # chat b does not wait for chat a
    assert "b1 out" in log and "a2 in" not in log
    release.set()
    await asyncio.gather(first, second)
    assert log.index("a1 out") < log.index("a2 in")
    assert len(locks) == 0  # nothing kept for chats nobody is sending to


async def test_retries_use_the_platforms_wait_and_give_up_with_the_last_error() -> None:
    calls: list[int] = []
    retried: list[tuple[int, float]] = []

    async def op() -> str:
        calls.append(1)
        raise Flaky(wait=0.001)

    with pytest.raises(Flaky):
        await call_with_retries(
            op,
            RetryPolicy(attempts=3, initial=5.0),
            retryable=lambda e: isinstance(e, Flaky),
            wait_hint=lambda e: e.wait if isinstance(e, Flaky) else None,
            on_retry=lambda e, n, wait: retried.append((n, wait)),
        )
    assert len(calls) == 3
    assert retried == [(1, 0.001), (2, 0.001)]


async def test_a_refusal_is_not_retried_and_a_recovery_returns_the_result() -> None:
    attempts: list[int] = []

    async def refused() -> None:
        attempts.append(1)
        raise Refused("no")

    with pytest.raises(Refused):
        await call_with_retries(
            refused, RetryPolicy(5, 0.001), retryable=lambda e: isinstance(e, Flaky)
        )
    assert len(attempts) == 1

    outcomes: list[Exception | str] = [Flaky(), Flaky(), "sent"]

    async def recovers() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    result = await call_with_retries(
        recovers, RetryPolicy(5, 0.001), retryable=lambda e: isinstance(e, Flaky)
    )
    assert result == "sent"


@given(
    initial=st.floats(0.001, 10),
    maximum=st.floats(0.001, 100),
    failures=st.integers(0, 20),
)
def test_backoff_doubles_up_to_its_ceiling_and_resets(
    initial: float, maximum: float, failures: int
) -> None:
    backoff = Backoff(initial, maximum)
    waits = [backoff.failed() for _ in range(failures)]
    assert all(initial <= w <= max(initial, maximum) for w in waits)
    assert all(b == min(a * 2, max(initial, maximum)) for a, b in itertools.pairwise(waits))
    backoff.reset()
    assert backoff.current == initial


@given(attempt=st.integers(1, 30), jitter=st.floats(0, 1))
def test_retry_backoff_stays_within_its_ceiling_and_jitter(attempt: int, jitter: float) -> None:
    policy = RetryPolicy(attempts=5, initial=0.5, maximum=30.0, jitter=jitter)
    base = min(0.5 * 2 ** (attempt - 1), 30.0)
    assert base <= policy.backoff(attempt) <= base * (1 + jitter)


async def test_connect_until_up_reports_each_failure_then_returns_the_connection() -> None:
    attempted = asyncio.Event()
    reports: list[tuple[str, float]] = []
    outcomes: list[Exception | str] = [OSError("down"), OSError("still down"), "socket"]

    async def connect() -> str:
        item = outcomes.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def failed(exc: Exception, delay: float) -> bool:
        reports.append((str(exc), delay))
        return True

    backoff = Backoff(0.001, 0.002)
    assert await connect_until_up(connect, backoff, on_failure=failed, attempted=attempted) == (
        "socket"
    )
    assert reports == [("down", 0.001), ("still down", 0.002)]
    assert attempted.is_set()
    assert backoff.current == 0.001  # reset by the success


async def test_connect_until_up_stops_when_the_failure_is_hopeless() -> None:
    attempted = asyncio.Event()

    async def connect() -> str:
        raise PermissionError("token rejected")

    result = await connect_until_up(
        connect, Backoff(0.001, 0.001), on_failure=lambda e, d: False, attempted=attempted
    )
    assert result is None
    assert attempted.is_set()
