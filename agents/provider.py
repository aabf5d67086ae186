"""The Anthropic model client: one streamed Messages call, retried, priced, made plain.

`AnthropicClient` implements `agents.model.ModelClient` on `anthropic.AsyncAnthropic`
(imported on first use, in a worker thread: it costs about a second). The SDK's own
retries are off; tenacity retries 408/409/429/5xx/529, connection errors and mid-stream
overload with exponential backoff (`backoff_delay`), but never once text reached `on_text`.
Fallback models get the same policy when the primary gives up on a transient error or is
unknown (404). Failures end as `ModelError` with a message a user can act on; the API key
never reaches a log.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from agents.model import Block, ModelError, ModelRequest, ModelResponse, TextCallback, Usage
from agents.pricing import cost_usd

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]

RETRYABLE_STATUSES = frozenset({408, 409, 429})
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
JITTER = 0.2
_MAX_EXPONENT = 62  # 2.0**62 * any sane base is far past any cap; avoids float overflow


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

    @property
    def overloaded(self) -> bool:
        return self.status == 529 or self.error_type == "overloaded_error"

    def describe(self) -> str:
        """Short form for logs: `529 overloaded_error`, `connection error: ConnectError`."""
        if self.kind in ("connection", "timeout"):
            return f"{self.kind} error: {self.message}"
        if self.kind == "stream":
            return f"mid-stream {self.error_type or 'error'}"
        parts = [str(self.status) if self.status is not None else "", self.error_type or ""]
        return " ".join(p for p in parts if p) or self.kind


class _StreamCut(Exception):
    """The stream ended without `message_stop`."""


class _BrokenAfterText(Exception):
    """An attempt failed after text reached `on_text`: never retried."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


def classify(exc: BaseException) -> Failure | None:
    """Map an SDK/transport exception to a `Failure`; None when it is not a model API error
    (such errors propagate unchanged)."""
    import anthropic
    import httpx2

    if isinstance(exc, _StreamCut):
        return Failure("connection", message="stream ended early", retryable=True)
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        body = exc.body
        error = body.get("error") if isinstance(body, dict) else None
        error_type = error.get("type") if isinstance(error, dict) else None
        message = exc.api_message or (error.get("message") if isinstance(error, dict) else None)
        headers = exc.response.headers
        if status == 200:  # an `event: error` inside a stream
            retryable = error_type in RETRYABLE_STREAM_ERRORS
            kind = "stream"
        else:
            retryable = status in RETRYABLE_STATUSES or status >= 500
            kind = "status"
            should_retry = headers.get("x-should-retry")
            if should_retry in ("true", "false"):
                retryable = should_retry == "true"
        return Failure(
            kind,
            status=status,
            error_type=error_type if isinstance(error_type, str) else None,
            message=str(message or exc.message)[:500],
            retryable=retryable,
            retry_after=parse_retry_after(headers),
        )
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return Failure("timeout", message=type(exc).__name__, retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        return Failure("connection", message=detail[:300], retryable=True)
    if isinstance(exc, httpx2.TransportError):
        return Failure("connection", message=f"{type(exc).__name__}: {exc}"[:300], retryable=True)
    return None


def _is_retryable(exc: BaseException) -> bool:
    failure = classify(exc)
    return failure is not None and failure.retryable


class AnthropicClient:
    """Claude over the Messages API, streaming, with retries and fallback models.

    `sleep` replaces `asyncio.sleep` between attempts (tests record the schedule with it).
    """

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        *,
        timeout: float = 600,
        max_attempts: int = 8,
        backoff_base: float = 2.0,
        backoff_cap: float = 60.0,
        retry_after_cap: float = 120.0,
        fallback_models: Sequence[str] = (),
        sleep: Sleep | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self.max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._retry_after_cap = retry_after_cap
        self.fallback_models = tuple(fallback_models)
        self._sleep: Sleep = sleep or asyncio.sleep
        self._client: AsyncAnthropic | None = None

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicClient(base_url={self._base_url!r}, fallback_models={self.fallback_models!r})"

    def _sdk(self) -> AsyncAnthropic:
        if self._client is None:
            from anthropic import AsyncAnthropic

            self._client = AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                max_retries=0,
                timeout=self._timeout,
            )
        return self._client

    async def _sdk_off_loop(self) -> AsyncAnthropic:
        """The SDK client, its first import (about a second of CPU) done in a worker thread
        so the event loop keeps serving other chats meanwhile instead of freezing."""
        await asyncio.to_thread(importlib.import_module, "anthropic")
        return self._sdk()

    async def aclose(self) -> None:
        """Close the HTTP connections (safe to call twice, or before any call)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    def retry_wait(self, state: RetryCallState) -> float:
        """The tenacity wait: `backoff_delay` for the attempt, honouring `retry-after`."""
        exc = state.outcome.exception() if state.outcome is not None else None
        failure = classify(exc) if exc is not None else None
        return backoff_delay(
            state.attempt_number,
            self._backoff_base,
            self._backoff_cap,
            JITTER,
            failure.retry_after if failure is not None else None,
            self._retry_after_cap,
        )

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """Stream one response; try fallback models when the primary gives up for good."""
        models = [request.model, *(m for m in self.fallback_models if m != request.model)]
        for index, model in enumerate(models):
            try:
                return await self._complete_model(replace(request, model=model), on_text)
            except _BrokenAfterText as exc:
                raise self._broken_error(exc.failure) from exc.__cause__
            except Exception as exc:
                failure = classify(exc)
                if failure is None:
                    raise
                can_fall_back = failure.retryable or failure.status == 404
                if can_fall_back and index + 1 < len(models):
                    log.warning(
                        "model %s failed for good (%s); falling back to %s",
                        model,
                        failure.describe(),
                        models[index + 1],
                    )
                    continue
                raise self._final_error(failure, model, models[: index + 1]) from exc
        raise AssertionError("unreachable: the last model either returns or raises")

    async def _complete_model(
        self, request: ModelRequest, on_text: TextCallback | None
    ) -> ModelResponse:
        def log_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            failure = classify(exc) if exc is not None else None
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning(
                "model call to %s failed (attempt %d/%d: %s); retrying in %.2f s",
                request.model,
                state.attempt_number,
                self.max_attempts,
                failure.describe() if failure is not None else type(exc).__name__,
                wait,
            )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self.retry_wait,
            retry=retry_if_exception(_is_retryable),
            before_sleep=log_retry,
            sleep=self._sleep,
            reraise=True,
        )
        return await retrying(self._stream_once, request, on_text)

    async def _stream_once(
        self, request: ModelRequest, on_text: TextCallback | None
    ) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = request.tools
        if request.temperature is not None:  # not a named parameter in SDK 2.x
            kwargs["extra_body"] = {"temperature": request.temperature}
        sent_text = False
        try:
            sdk = self._client or await self._sdk_off_loop()
            async with sdk.messages.stream(**kwargs) as stream:
                async for event in stream:
                    if event.type == "text" and event.text and on_text is not None:
                        sent_text = True
                        await on_text(event.text)
                message = await stream.get_final_message()
            if message.stop_reason is None:
                raise _StreamCut("stream ended without message_stop")
        except Exception as exc:
            failure = classify(exc) if sent_text else None
            if failure is not None:
                raise _BrokenAfterText(failure) from exc
            raise
        return _to_response(message, request.model)

    def _final_error(self, failure: Failure, model: str, tried: list[str]) -> ModelError:
        attempts = f"gave up after {self.max_attempts} attempts"
        also = f" Tried models: {', '.join(tried)}." if len(tried) > 1 else ""
        detail = f": {failure.message}" if failure.message else ""
        status = failure.status
        if failure.retryable:
            if failure.overloaded:
                text = f"The model API is overloaded; {attempts}. Try again in a few minutes."
            elif status == 429 or failure.error_type == "rate_limit_error":
                text = f"The model API rate limit was hit (429); {attempts}. Wait a minute and try again."
            elif failure.kind == "timeout":
                text = (
                    f"The model API did not answer within {self._timeout:g} s; {attempts}. "
                    "Try again later."
                )
            elif failure.kind == "connection":
                where = self._base_url or "https://api.anthropic.com"
                text = (
                    f"Could not reach the model API at {where} ({failure.message}); {attempts}. "
                    "Check the network and providers.anthropic.base_url."
                )
            else:
                code = status if status and status != 200 else failure.error_type
                text = f"The model API failed with a server error ({code}); {attempts}. Try again later."
            return ModelError(text + also, status=status, retryable=True)
        if status == 401:
            text = "The model API rejected the API key (401). Check ANTHROPIC_API_KEY."
        elif status == 403:
            text = (
                f"The model API refused access (403){detail}. "
                f"Check that the API key may use model {model!r}."
            )
        elif status == 404:
            text = (
                f"The model API does not know model {model!r} (404){detail}. "
                "Check agent.model in config.yaml."
            )
        elif status == 413:
            text = (
                f"The request is too large for the model API (413){detail}. "
                "Start a fresh session with /new."
            )
        elif status == 402:
            text = f"The model API refused the request for billing (402){detail}. Check the account's credits."
        elif status == 200:
            text = f"The model API stream failed ({failure.error_type}){detail}."
        else:
            text = f"The model API rejected the request ({status}){detail}"
        return ModelError(text + also, status=status, retryable=False)

    def _broken_error(self, failure: Failure) -> ModelError:
        return ModelError(
            f"The model API stream broke after the reply had started ({failure.describe()}); "
            "the reply is incomplete. Send the message again to retry.",
            status=failure.status,
            retryable=failure.retryable,
        )


def _to_response(message: Message, model: str) -> ModelResponse:
    content: list[Block] = []
    for block in message.content:
        if block.type == "text":
            if block.text:
                content.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(arguments)}
            )
        elif block.type in ("thinking", "redacted_thinking"):
            content.append(block.to_dict())
        else:
            log.debug("dropping unsupported content block type %s", block.type)
    raw = message.usage
    usage = Usage(
        input_tokens=raw.input_tokens or 0,
        output_tokens=raw.output_tokens or 0,
        cache_read_tokens=raw.cache_read_input_tokens or 0,
        cache_write_tokens=raw.cache_creation_input_tokens or 0,
    )
    answered_by = message.model or model
    usage.cost_usd = cost_usd(answered_by, usage)
    return ModelResponse(
        content=content,
        stop_reason=message.stop_reason or "end_turn",
        usage=usage,
        model=answered_by,
    )
