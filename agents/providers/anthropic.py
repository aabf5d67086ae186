"""The Anthropic Messages API as a `ModelClient`: one streamed call, retried, priced.

`AnthropicClient` runs on `anthropic.AsyncAnthropic` (imported on first use, in a worker
thread: it costs about a second). The SDK's own retries are off; the shared policy
(`agents.providers.retry`) retries 408/409/429/5xx/529, connection errors and mid-stream
overload, never once text reached `on_text`. Our blocks are the Messages API's own shape, so
requests pass through unconverted. The API key never reaches a log.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from agents.model import (
    Block,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextCallback,
    Usage,
    text_block,
    tool_use_block,
)
from agents.pricing import Price, cost_usd
from agents.providers.anthropic_body import BodyEncoder
from agents.providers.retry import (
    CONNECT_TIMEOUT_S,
    BrokenAfterText,
    Failure,
    GaveUp,
    RetryPolicy,
    Sleep,
    StreamCut,
    broken_error,
    final_error,
    parse_retry_after,
    transport_failure,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic
    from anthropic.types import Message as SdkMessage

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 409, 429})
RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
DEFAULT_BASE_URL = "https://api.anthropic.com"


def classify(exc: BaseException) -> Failure | None:
    """Map an SDK/transport exception to a `Failure`; None when it is not a model API error
    (such errors propagate unchanged)."""
    import anthropic

    if isinstance(exc, StreamCut):
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
    failure = transport_failure(exc, anthropic.APIConnectionError)
    if failure is not None:
        return failure
    if isinstance(exc, anthropic.APITimeoutError):
        return Failure("timeout", message=type(exc).__name__, retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        return Failure("connection", message=exc.message[:300], retryable=True)
    return None


_kept_types: tuple[object, ...] = ()


def _keep_stream_types() -> None:
    """Hold the generic models the SDK's stream accumulator builds for every response.

    It parametrizes `ParsedMessage[ResponseFormatT]` per response; pydantic caches that class
    only weakly, so once the collector has run (every turn, under load) the next response
    built it again: about 0.7 ms of CPU per model call. A reference held here keeps the
    cached class alive. Best effort: if the SDK changes shape, nothing but the time is lost.
    """
    global _kept_types
    if _kept_types:
        return
    try:
        from anthropic.lib.streaming import AsyncMessageStream
        from anthropic.types import ParsedMessage, ParsedTextBlock

        params: tuple[Any, ...] = getattr(AsyncMessageStream, "__parameters__", ())
        (format_t,) = params
        generic: Any = (ParsedMessage, ParsedTextBlock)
        _kept_types = tuple(model[format_t] for model in generic)
    except (ImportError, TypeError, ValueError, AttributeError) as exc:
        log.debug("not keeping the SDK's stream types: %s", exc)


class AnthropicClient:
    """Claude over the Messages API, streaming, with retries.

    `sleep` replaces `asyncio.sleep` between attempts (tests record the schedule with it);
    `prices` overrides the built-in price table per model (USD per million tokens).
    """

    kind = "anthropic"

    def __init__(
        self,
        api_key: str,
        base_url: str | None = None,
        *,
        name: str = "anthropic",
        timeout: float = 600,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        max_attempts: int = 8,
        backoff_base: float = 2.0,
        backoff_cap: float = 60.0,
        retry_after_cap: float = 120.0,
        unreachable_budget_s: float = 30.0,
        prices: Mapping[str, Price] | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self.name = name
        self._api_key = api_key
        self._base_url = base_url
        self._timeout = timeout
        self._connect_timeout = min(connect_timeout, timeout)
        self._prices = dict(prices or {})
        self.policy = RetryPolicy(
            classify,
            max_attempts=max_attempts,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            retry_after_cap=retry_after_cap,
            unreachable_budget_s=unreachable_budget_s,
            sleep=sleep,
        )
        self._client: AsyncAnthropic | None = None
        self._body = BodyEncoder()

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicClient(name={self.name!r}, base_url={self._base_url!r})"

    @property
    def max_attempts(self) -> int:
        return self.policy.max_attempts

    def _sdk(self) -> AsyncAnthropic:
        if self._client is None:
            from anthropic import AsyncAnthropic, DefaultAioHttpClient, Timeout

            _keep_stream_types()

            self._client = AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                max_retries=0,
                timeout=Timeout(self._timeout, connect=self._connect_timeout),
                http_client=DefaultAioHttpClient(),  # the SDK's own, on aiohttp
            )
        return self._client

    async def _sdk_off_loop(self) -> AsyncAnthropic:
        """The SDK client, its first import (about a second of CPU) done in a worker thread
        so the event loop keeps serving other chats meanwhile instead of freezing."""
        await asyncio.to_thread(importlib.import_module, "anthropic")
        return self._sdk()

    async def warm(self) -> None:
        """Load the SDK and build the client ahead of the first request (the daemon calls
        this in the background after READY), so the first reply is as quick as later ones."""
        if self._client is None:
            await self._sdk_off_loop()

    async def aclose(self) -> None:
        """Close the HTTP connections (safe to call twice, or before any call)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """Stream one response, retried by the policy; `ModelError` when it gives up."""
        try:
            return await self.policy.call(
                request.model, lambda: self._stream_once(request, on_text)
            )
        except BrokenAfterText as exc:
            raise broken_error(exc.failure) from exc.__cause__
        except GaveUp as exc:
            raise self._error(exc, request.model) from exc.__cause__

    def _error(self, gave_up: GaveUp, model: str) -> ModelError:
        setting = f"providers.{self.name}.base_url"
        key_env = (
            "ANTHROPIC_API_KEY" if self.name == "anthropic" else f"providers.{self.name}.api_key"
        )
        return final_error(
            gave_up,
            model,
            where=self._base_url or DEFAULT_BASE_URL,
            setting=setting,
            key_env=key_env,
            timeout=self._timeout,
        )

    async def _stream_once(
        self, request: ModelRequest, on_text: TextCallback | None
    ) -> ModelResponse:
        sent_text = False
        try:
            sdk = self._client or await self._sdk_off_loop()
            from anthropic import AsyncStream
            from anthropic.lib.streaming import AsyncMessageStreamManager
            from anthropic.types import Message, RawMessageStreamEvent

            # What `sdk.messages.stream(...)` sends, with a body we encoded (anthropic_body).
            api_request = sdk.post(
                "/v1/messages",
                cast_to=Message,
                content=self._body.encode(request),
                options={"headers": {"X-Stainless-Helper-Method": "stream"}},
                stream=True,
                stream_cls=AsyncStream[RawMessageStreamEvent],
            )
            async with AsyncMessageStreamManager(api_request) as stream:
                async for event in stream:
                    if event.type == "text" and event.text and on_text is not None:
                        sent_text = True
                        await on_text(event.text)
                message = await stream.get_final_message()
            if message.stop_reason is None:
                raise StreamCut("stream ended without message_stop")
        except Exception as exc:
            failure = classify(exc) if sent_text else None
            if failure is not None:
                raise BrokenAfterText(failure) from exc
            raise
        return self._to_response(message, request.model)

    def _to_response(self, message: SdkMessage, model: str) -> ModelResponse:
        content: list[Block] = []
        for block in message.content:
            if block.type == "text":
                if block.text:
                    content.append(text_block(block.text))
            elif block.type == "tool_use":
                arguments = block.input if isinstance(block.input, dict) else {}
                content.append(tool_use_block(block.id, block.name, dict(arguments)))
            elif block.type in ("thinking", "redacted_thinking"):
                content.append(cast(Block, block.to_dict()))
            else:
                log.debug("dropping unsupported content block type %s", block.type)
        raw = message.usage
        split = getattr(raw, "cache_creation", None)  # 5-minute and 1-hour writes apart
        usage = Usage(
            input_tokens=raw.input_tokens or 0,
            output_tokens=raw.output_tokens or 0,
            cache_read_tokens=raw.cache_read_input_tokens or 0,
            cache_write_tokens=raw.cache_creation_input_tokens or 0,
            cache_write_1h_tokens=(getattr(split, "ephemeral_1h_input_tokens", 0) or 0),
        )
        answered_by = message.model or model
        price = self._prices.get(model) or self._prices.get(answered_by)
        usage.cost_usd = cost_usd(answered_by, usage, price)
        return ModelResponse(
            content=content,
            stop_reason=message.stop_reason or "end_turn",
            usage=usage,
            model=answered_by,
        )
