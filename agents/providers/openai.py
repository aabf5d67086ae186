"""Any Chat Completions endpoint as a `ModelClient` (OpenAI, OpenRouter, Ollama, vLLM ...).

`OpenAIClient` runs on the official `openai` SDK's `AsyncOpenAI` (imported on first use, in
a worker thread) with `max_retries=0`; the shared policy (`agents.providers.retry`) retries.
It streams with `stream_options.include_usage` (usage arrives in a last chunk with no
choices), rebuilds tool calls from their pieces, and reads only `delta.content` as text:
reasoning fields some servers add (`reasoning_content`, `reasoning`) never reach a chat.
Cost comes from the provider's configured prices; a model without one costs 0 (local).
Images of tool results go in a user message after the tool messages (`openai_wire`); a model
that refuses them (400) gets the request again with notes instead, and no more of them. What
it shares with the `anthropic` provider (settings, the client's life, the retried call) is
`sdk_provider.py`'s.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

from agents.model import (
    Block,
    ModelError,
    ModelRequest,
    ModelResponse,
    TextCallback,
    Usage,
    text_block,
)
from agents.pricing import cost_usd
from agents.providers.openai_body import ChatBodyEncoder
from agents.providers.openai_wire import (
    FINISH_REASONS,
    ToolCallAccumulator,
)
from agents.providers.retry import (
    RETRYABLE_STATUSES,
    BrokenAfterText,
    Failure,
    StreamCut,
    parse_retry_after,
    transport_failure,
)
from agents.providers.sdk_provider import SdkProvider

if TYPE_CHECKING:
    from openai import AsyncOpenAI

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
NON_RETRYABLE_STREAM_ERRORS = frozenset({"invalid_request_error", "authentication_error"})
_call_ids = itertools.count(1)


def _error_fields(body: object) -> tuple[str | None, str | None]:
    """(type or code, message) of an OpenAI-style error body."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None, None
    kind = error.get("type") or error.get("code")
    message = error.get("message")
    return (str(kind) if kind else None), (str(message) if message else None)


def classify(exc: BaseException) -> Failure | None:
    """Map an `openai` SDK/transport exception to a `Failure` (None: not a model API error)."""
    import openai

    if isinstance(exc, StreamCut):
        return Failure("connection", message="stream ended early", retryable=True)
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        error_type, message = _error_fields(exc.body)
        retryable = status in RETRYABLE_STATUSES or status >= 500
        return Failure(
            "status",
            status=status,
            error_type=error_type,
            message=(message or exc.message)[:500],
            retryable=retryable,
            retry_after=parse_retry_after(exc.response.headers),
        )
    failure = transport_failure(exc, openai.APIConnectionError)
    if failure is not None:
        return failure
    if isinstance(exc, openai.APITimeoutError):
        return Failure("timeout", message=type(exc).__name__, retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return Failure("connection", message=exc.message[:300], retryable=True)
    if isinstance(exc, openai.APIError):  # an error object inside the stream
        error_type, message = _error_fields(exc.body)
        return Failure(
            "stream",
            status=200,
            error_type=error_type or "error",
            message=(message or exc.message)[:500],
            retryable=error_type not in NON_RETRYABLE_STREAM_ERRORS,
        )
    return None


def _has_tool_images(request: ModelRequest) -> bool:
    return any(
        block["type"] == "tool_result"
        and isinstance(block["content"], list)
        and any(part["type"] == "image" for part in block["content"])
        for message in request.messages
        if message["role"] == "user"
        for block in message["content"]
    )


class OpenAIClient(SdkProvider["AsyncOpenAI"]):
    """A Chat Completions provider, streaming, with retries (settings: `SdkProvider`)."""

    kind = "openai"
    sdk_module = "openai"
    default_base_url = DEFAULT_BASE_URL

    def _setup(self) -> None:
        self._api_key = self._api_key or "none"  # local servers take any key; the SDK wants one
        self._base_url = self._base_url or DEFAULT_BASE_URL
        self._body = ChatBodyEncoder()
        self._no_tool_images: set[str] = set()  # models that refused tool-result images

    classify = staticmethod(classify)

    def _make_sdk(self) -> AsyncOpenAI:
        from openai import AsyncOpenAI, DefaultAioHttpClient, Timeout

        return AsyncOpenAI(
            api_key=self._api_key,
            base_url=self._base_url,
            max_retries=0,
            timeout=Timeout(self._timeout, connect=self._connect_timeout),
            http_client=DefaultAioHttpClient(),  # the SDK's own, on aiohttp
        )

    async def complete(
        self, request: ModelRequest, on_text: TextCallback | None = None
    ) -> ModelResponse:
        await self._sdk_off_loop()
        images = request.model not in self._no_tool_images and _has_tool_images(request)
        try:
            return await self._complete(request, on_text, images)
        except ModelError as exc:
            if not images or exc.kind != "bad_request":
                raise
            # A model that takes no images refuses them (400): the turn goes on without the
            # tool results' images (notes instead). Only when that request is taken is the
            # model marked as taking none, so a 400 for another reason changes nothing.
            log.warning(
                "%s/%s refused a request with tool-result images (%s); sending it without them",
                self.name,
                request.model,
                exc,
            )
            response = await self._complete(request, on_text, False)
            self._no_tool_images.add(request.model)
            return response

    async def _complete(
        self, request: ModelRequest, on_text: TextCallback | None, tool_images: bool
    ) -> ModelResponse:
        return await self._retried(
            request.model, lambda: self._stream_once(request, on_text, tool_images)
        )

    async def _stream_once(
        self, request: ModelRequest, on_text: TextCallback | None, tool_images: bool = True
    ) -> ModelResponse:
        body = self._body.encode(request, tool_images)
        texts: list[str] = []
        calls = ToolCallAccumulator()
        finish: str | None = None
        raw_usage: Any = None
        answered_by = request.model
        sent_text = False
        try:
            from openai import AsyncStream
            from openai.types.chat import ChatCompletion, ChatCompletionChunk

            # What `chat.completions.create(stream=True)` sends, with a body we encoded.
            stream = await self._sdk().post(
                "/chat/completions",
                cast_to=ChatCompletion,
                content=body,
                stream=True,
                stream_cls=AsyncStream[ChatCompletionChunk],
            )
            async for chunk in stream:
                if chunk.usage is not None:
                    raw_usage = chunk.usage
                if chunk.model:
                    answered_by = chunk.model
                for choice in chunk.choices:
                    delta = choice.delta
                    if delta is not None:
                        if delta.content:
                            texts.append(delta.content)
                            if on_text is not None:
                                sent_text = True
                                await on_text(delta.content)
                        for piece in delta.tool_calls or ():
                            calls.add(piece)
                    if choice.finish_reason:
                        finish = choice.finish_reason
            if finish is None:
                raise StreamCut("stream ended without a finish_reason")
        except Exception as exc:
            failure = classify(exc) if sent_text else None
            if failure is not None:
                raise BrokenAfterText(failure) from exc
            raise
        content: list[Block] = []
        text = "".join(texts)
        if text:
            content.append(text_block(text))
        if calls:
            content.extend(calls.blocks(f"call_perch_{next(_call_ids)}_"))
        stop = FINISH_REASONS.get(finish, "end_turn")
        if calls and stop == "end_turn":
            stop = "tool_use"  # some servers say "stop" after tool calls
        return ModelResponse(
            content=content,
            stop_reason=stop,
            usage=self._usage(raw_usage, request.model, answered_by),
            model=answered_by,
        )

    def _usage(self, raw: Any, model: str, answered_by: str) -> Usage:
        if raw is None:
            return Usage()
        details = getattr(raw, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        prompt = raw.prompt_tokens or 0
        usage = Usage(
            input_tokens=max(prompt - cached, 0),
            output_tokens=raw.completion_tokens or 0,
            cache_read_tokens=cached,
        )
        price = self._price(model, answered_by)
        usage.cost_usd = cost_usd(model, usage, price) if price is not None else 0.0
        return usage

    async def list_models(self) -> list[str]:
        """Model ids the endpoint lists (`GET /models`); raises the SDK's errors."""
        page = await (await self._sdk_off_loop()).models.list()
        return [m.id for m in page.data]
