"""The Anthropic Messages API as a `ModelClient`: one streamed call, retried, priced.

`AnthropicClient` runs on `anthropic.AsyncAnthropic` (imported on first use, in a worker
thread: it costs about a second). The SDK's own retries are off; the shared policy
(`agents.providers.retry`) retries 408/409/429/5xx/529, connection errors and mid-stream
overload, never once text reached `on_text`. Our blocks are the Messages API's own shape, so
requests pass through unconverted. The API key never reaches a log. What it shares with the
`openai` provider (settings, the client's life, the retried call) is `sdk_provider.py`'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from agents.model import (
    Block,
    ModelRequest,
    ModelResponse,
    TextCallback,
    Usage,
    text_block,
    tool_use_block,
)
from agents.pricing import cost_usd
from agents.providers.anthropic_body import BodyEncoder
from agents.providers.retry import (
    BrokenAfterText,
    Failure,
    StreamCut,
    parse_retry_after,
    transport_failure,
)
from agents.providers.sdk_provider import SdkProvider

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


class AnthropicClient(SdkProvider["AsyncAnthropic"]):
    """Claude over the Messages API, streaming, with retries (settings: `SdkProvider`)."""

    kind = "anthropic"
    sdk_module = "anthropic"
    default_base_url = DEFAULT_BASE_URL

    def _setup(self) -> None:
        self._body = BodyEncoder()  # remembers the encoded tools and system blocks

    classify = staticmethod(classify)

    def _make_sdk(self) -> AsyncAnthropic:
        from anthropic import AsyncAnthropic, DefaultAioHttpClient, Timeout

        _keep_stream_types()
        return AsyncAnthropic(
            api_key=self._api_key,
            base_url=self._base_url,
            max_retries=0,
            timeout=Timeout(self._timeout, connect=self._connect_timeout),
            http_client=DefaultAioHttpClient(),  # the SDK's own, on aiohttp
        )

    def _shown(self, model: str) -> str:
        return model  # the default provider's models go by their bare names

    def _key_setting(self) -> str:
        return "ANTHROPIC_API_KEY" if self.name == "anthropic" else super()._key_setting()

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        """Stream one response, retried by the policy; `ModelError` when it gives up."""
        return await self._retried(request.model, lambda: self._stream_once(request, on_text))

    async def _stream_once(
        self, request: ModelRequest, on_text: TextCallback | None
    ) -> ModelResponse:
        sent_text = False
        try:
            sdk = await self._sdk_off_loop()
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
        usage.cost_usd = cost_usd(answered_by, usage, self._price(model, answered_by))
        return ModelResponse(
            content=content,
            stop_reason=message.stop_reason or "end_turn",
            usage=usage,
            model=answered_by,
        )
