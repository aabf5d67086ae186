"""Retrying one platform call, with tenacity: the adapters' single retry policy.

`call_with_retries(op, policy, retryable=..., wait_hint=..., on_retry=...)` runs `op` up to
`policy.attempts` times. Between attempts it waits what the platform asked for (`wait_hint`,
e.g. a 429's Retry-After) or an exponential backoff from `policy.initial`, capped at
`policy.maximum`, stretched by up to `policy.jitter` (a fraction) so many senders do not
retry in step. Only errors `retryable` accepts are retried; the last error is re-raised as
it was, so callers turn it into their own message.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int
    initial: float
    maximum: float = 30.0
    jitter: float = 0.0

    def backoff(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1-based) when no hint was given."""
        base = min(self.initial * 2 ** (attempt - 1), self.maximum)
        return base * random.uniform(1.0, 1.0 + self.jitter) if self.jitter else base


def _no_hint(exc: BaseException) -> float | None:
    return None


async def call_with_retries(
    op: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    retryable: Callable[[BaseException], bool],
    wait_hint: Callable[[BaseException], float | None] = _no_hint,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """`op()`, retried as the module docstring says; `on_retry(error, attempt, wait)` is
    called before each wait (for a log line). The first attempt runs without tenacity's
    machinery (most calls succeed at once; this is on every message's path)."""

    def pause_after(exc: BaseException, attempt: int) -> float:
        hint = wait_hint(exc)
        return hint if hint is not None else policy.backoff(attempt)

    try:
        return await op()
    except Exception as exc:
        if policy.attempts <= 1 or not retryable(exc):
            raise
        pause = pause_after(exc, 1)
        if on_retry is not None:
            on_retry(exc, 1, pause)
    await asyncio.sleep(pause)

    # Attempts 2..n: tenacity counts them from 1, so every number below is shifted by one.
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return pause_after(exc, state.attempt_number + 1) if exc is not None else 0.0

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        if on_retry is not None and exc is not None:
            pause = state.next_action.sleep if state.next_action is not None else 0.0
            on_retry(exc, state.attempt_number + 1, pause)

    async def attempt() -> T:  # tenacity would not await what a plain lambda returns
        return await op()

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.attempts - 1),
        wait=wait,
        retry=retry_if_exception(retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    return await retrying(attempt)
