"""The retry policy every provider shares: classify a failure, back off, give up plainly.

Each provider maps its SDK's exceptions to a `Failure` (`classify`); `RetryPolicy.call` runs
one attempt function under tenacity with exponential backoff (`backoff_delay`, honouring a
server's `retry-after`), never retrying once text reached the user (`BrokenAfterText`).
Budgets: `max_attempts` for everything, and for an unreachable endpoint (DNS failure,
connection refused, no connection accepted within `CONNECT_TIMEOUT_S`: nothing answered at
all) at most `unreachable_budget_s` seconds of waiting in total, so a model that is down
fails fast while an overloaded one gets patience.
`final_error` turns the last failure into a `ModelError` a user can act on.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from agents.model import ErrorKind, ModelError

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 409, 429})
JITTER = 0.2
UNREACHABLE_BUDGET_S = 30.0
CONNECT_TIMEOUT_S = 10.0  # a host that takes longer to accept a connection counts as down
_MAX_EXPONENT = 62  # 2.0**62 * any sane base is far past any cap; avoids float overflow


def transport_failure(exc: BaseException, sdk_error: type[BaseException]) -> Failure | None:
    """The `Failure` for an exchange the HTTP stack broke off (no connection, or no whole
    answer), judged by the innermost error of that stack in `exc`'s chain. None unless
    `exc` itself is such an error or the SDK's `sdk_error` (its connection error) over one.

    The SDKs run on aiohttp (their aiohttp clients), whose errors they pass on as httpx2's,
    and that mapping says `ConnectError` (openai: `ConnectTimeout`) for a refused connection,
    a reset and a server that closed before answering alike. aiohttp's own error, inside,
    tells them apart: only a connection never made (DNS, refused, unroutable, TLS refused,
    or not accepted within the connect timeout) means nothing answered. httpx2's errors are
    read the same way where no aiohttp error lies beneath.
    """
    import aiohttp
    import httpx2

    if not isinstance(exc, sdk_error | aiohttp.ClientError | httpx2.TransportError):
        return None
    root: BaseException | None = None
    current: BaseException | None = exc
    for _ in range(16):  # a chain longer than this is no HTTP stack's
        if current is None:
            break
        if isinstance(current, aiohttp.ClientError | httpx2.TransportError):
            root = current  # the innermost one wins
        current = current.__cause__ or current.__context__
    if root is None:
        return None
    if isinstance(root, aiohttp.ConnectionTimeoutError | httpx2.ConnectTimeout):
        return Failure(
            "connection",
            message="ConnectTimeout: no connection was accepted in time",
            retryable=True,
            unreachable=True,
        )
    if isinstance(root, aiohttp.ServerTimeoutError | httpx2.TimeoutException):
        return Failure("timeout", message=type(root).__name__, retryable=True)
    return Failure(
        "connection",
        message=f"{type(root).__name__}: {root}"[:300],
        retryable=True,
        unreachable=isinstance(root, aiohttp.ClientConnectorError | httpx2.ConnectError),
    )


def backoff_delay(
    attempt: int,
    base: float,
    cap: float,
    jitter: float = JITTER,
    retry_after: float | None = None,
    retry_after_cap: float = 120.0,
    *,
    rand: Callable[[], float] = random.random,
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based).

    A server's `retry_after` wins, capped at `retry_after_cap`. Otherwise
    `base * 2**(attempt-1)`, scaled by a random factor in `[1-jitter, 1+jitter]`, capped
    at `cap`: with base 2 that is about 2, 4, 8, ... 60, 60.
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, retry_after_cap)
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT)
    raw = base * 2.0**exponent
    factor = 1.0 + jitter * (2.0 * rand() - 1.0)
    return min(raw * factor, cap)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, or `retry-after` as seconds or
    an HTTP date. None when absent, negative or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return seconds if seconds >= 0 else None


@dataclass(frozen=True, slots=True)
class Failure:
    """What went wrong in one attempt, in terms the retry policy and the user care about."""

    kind: str  # "status" | "stream" | "connection" | "timeout"
    status: int | None = None
    error_type: str | None = None
    message: str = ""
    retryable: bool = False
    retry_after: float | None = None
    unreachable: bool = False  # nothing answered: DNS failure, refused, reset on connect

    @property
    def overloaded(self) -> bool:
        return self.status == 529 or self.error_type == "overloaded_error"

    @property
    def rate_limited(self) -> bool:
        return self.status == 429 or self.error_type == "rate_limit_error"

    def error_kind(self) -> ErrorKind:
        if self.overloaded:
            return "overloaded"
        if self.rate_limited:
            return "rate_limit"
        if self.kind == "timeout":
            return "timeout"
        if self.kind == "connection":
            return "unreachable" if self.unreachable else "server"
        status = self.status or 0
        if status in (401, 403):
            return "auth"
        if status == 404:
            return "not_found"
        if status == 402:
            return "billing"
        return "server" if self.retryable else "bad_request"

    def describe(self) -> str:
        """Short form for logs: `529 overloaded_error`, `connection error: ConnectError`."""
        if self.kind in ("connection", "timeout"):
            return f"{self.kind} error: {self.message}"
        if self.kind == "stream":
            return f"mid-stream {self.error_type or 'error'}"
        parts = [str(self.status) if self.status is not None else "", self.error_type or ""]
        return " ".join(p for p in parts if p) or self.kind


class StreamCut(Exception):
    """The stream ended without its final event."""


class BrokenAfterText(Exception):
    """An attempt failed after text reached `on_text`: never retried."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


Classifier = Callable[[BaseException], "Failure | None"]


class RetryPolicy:
    """Backoff and budgets for one provider; `sleep` replaces `asyncio.sleep` in tests."""

    def __init__(
        self,
        classify: Classifier,
        *,
        max_attempts: int = 8,
        backoff_base: float = 2.0,
        backoff_cap: float = 60.0,
        retry_after_cap: float = 120.0,
        unreachable_budget_s: float = UNREACHABLE_BUDGET_S,
        sleep: Sleep | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.classify = classify
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.unreachable_budget_s = unreachable_budget_s
        self.sleep: Sleep = sleep or asyncio.sleep

    def _failure(self, state: RetryCallState) -> Failure | None:
        exc = state.outcome.exception() if state.outcome is not None else None
        return self.classify(exc) if exc is not None else None

    def wait(self, state: RetryCallState) -> float:
        """The tenacity wait: `backoff_delay` for the attempt, honouring `retry-after`."""
        failure = self._failure(state)
        return backoff_delay(
            state.attempt_number,
            self.backoff_base,
            self.backoff_cap,
            JITTER,
            failure.retry_after if failure is not None else None,
            self.retry_after_cap,
        )

    def _stop(self, state: RetryCallState) -> bool:
        if state.attempt_number >= self.max_attempts:
            return True
        failure = self._failure(state)
        if failure is None or not failure.unreachable:
            return False
        upcoming = getattr(state, "upcoming_sleep", 0.0) or 0.0
        return state.idle_for + upcoming > self.unreachable_budget_s

    def _retryable(self, exc: BaseException) -> bool:
        failure = self.classify(exc)
        return failure is not None and failure.retryable

    async def call(self, label: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run `attempt` until it succeeds, fails for good, or a budget is spent. A model
        API failure ends as `GaveUp` (with the attempt count), anything else propagates."""
        attempts = 0

        async def counted() -> T:
            nonlocal attempts
            attempts += 1
            return await attempt()

        def log_retry(state: RetryCallState) -> None:
            failure = self._failure(state)
            exc = state.outcome.exception() if state.outcome is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning(
                "model call to %s failed (attempt %d/%d: %s); retrying in %.2f s",
                label,
                state.attempt_number,
                self.max_attempts,
                failure.describe() if failure is not None else type(exc).__name__,
                wait,
            )

        retrying = AsyncRetrying(
            stop=self._stop,
            wait=self.wait,
            retry=retry_if_exception(self._retryable),
            before_sleep=log_retry,
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return await retrying(counted)
        except BrokenAfterText:
            raise
        except Exception as exc:
            failure = self.classify(exc)
            if failure is None:
                raise
            raise GaveUp(failure, attempts) from exc


class GaveUp(Exception):
    """The policy stopped: `failure` is the last attempt's, after `attempts` attempts."""

    def __init__(self, failure: Failure, attempts: int) -> None:
        super().__init__(failure.describe())
        self.failure = failure
        self.attempts = attempts


def final_error(
    gave_up: GaveUp, model: str, *, where: str, setting: str, key_env: str, timeout: float
) -> ModelError:
    """The `ModelError` for a failure the policy gave up on. `where` is the endpoint,
    `setting` the config key of its base URL, `key_env` where the API key comes from."""
    failure = gave_up.failure
    attempts = f"gave up after {gave_up.attempts} attempts"
    detail = f": {failure.message}" if failure.message else ""
    status = failure.status
    kind = failure.error_kind()
    if failure.retryable:
        if kind == "overloaded":
            text = f"The model API is overloaded; {attempts}. Try again in a few minutes."
        elif kind == "rate_limit":
            text = (
                f"The model API rate limit was hit (429); {attempts}. Wait a minute and try again."
            )
        elif kind == "timeout":
            text = (
                f"The model API did not answer within {timeout:g} s; {attempts}. Try again later."
            )
        elif failure.kind == "connection":
            text = (
                f"Could not reach the model API at {where} ({failure.message}); {attempts}. "
                f"The model {model} can't be reached right now: check the network, that the "
                f"server is running, and {setting}."
            )
        else:
            code = status if status and status != 200 else failure.error_type
            text = (
                f"The model API failed with a server error ({code}); {attempts}. Try again later."
            )
        return ModelError(text, status=status, retryable=True, kind=kind)
    if status == 401:
        text = f"The model API rejected the API key (401). Check {key_env}."
    elif status == 403:
        text = (
            f"The model API refused access (403){detail}. "
            f"Check that the API key may use model {model!r}."
        )
    elif status == 404:
        text = (
            f"The model API does not know model {model!r} (404){detail}. "
            "Check agent.model in config.yaml, or pick another with /model."
        )
    elif status == 413:
        text = f"The request is too large for the model API (413){detail}."
    elif status == 402:
        text = f"The model API refused the request for billing (402){detail}. Check the account's credits."
    elif status == 200:
        text = f"The model API stream failed ({failure.error_type}){detail}."
    else:
        text = f"The model API rejected the request ({status}){detail}"
    return ModelError(text, status=status, retryable=False, kind=kind, detail=failure.message)


def broken_error(failure: Failure) -> ModelError:
    return ModelError(
        f"The model API stream broke after the reply had started ({failure.describe()}); "
        "the reply is incomplete. Send the message again to retry.",
        status=failure.status,
        retryable=failure.retryable,  # the user may send again; no automatic retry or fallback
        kind="broken_stream",
    )
