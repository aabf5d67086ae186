"""A fake Anthropic Messages API on 127.0.0.1 that the real `anthropic` SDK talks to.

Scripted `Reply`s are served in order (`queue`), then `default` (an echo) answers. Streams
carry exactly the SSE events of the real API; errors carry its JSON error shape. Every POST
to `/v1/messages` is recorded (body, its raw bytes and headers) so tests can assert what was
sent. With a `PromptCache` (`tests.fakes.prompt_cache`) the usage of each answer reports
what the API's prompt cache would have read and written at `clock()`, and requests that
break its rules (over four breakpoints, a 1-hour one after a 5-minute one) get its 400.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from tests.fakes.prompt_cache import CacheRuleError, PromptCache

ReplyKind = Literal["text", "tool_use", "http_error", "stream_error", "hang", "disconnect", "stall"]

_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}{next(_ids):024x}"


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with the classmethods, not the constructor."""

    kind: ReplyKind
    reply_text: str = ""  # named apart from the `text` classmethod, which would shadow it
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()  # (id, name, input)
    delay: float = 0.0
    chunk: int = 0
    usage: Mapping[str, Any] | None = None
    stop_reason: str = "end_turn"
    status: int = 200
    error_type: str = ""
    message: str = ""
    retry_after: float | None = None
    partial_text: str | None = None
    hold: asyncio.Event | None = field(default=None, compare=False)

    @classmethod
    def text(
        cls,
        text: str,
        *,
        delay: float = 0,
        chunk: int = 0,
        usage: Mapping[str, int] | None = None,
        stop_reason: str = "end_turn",
        hold: asyncio.Event | None = None,
    ) -> Reply:
        """A text answer. `chunk` > 0 streams it in deltas of that many characters; `hold`
        makes the server wait for the event before the first byte (deterministic latency)."""
        return cls(
            "text",
            reply_text=text,
            delay=delay,
            chunk=chunk,
            usage=usage,
            stop_reason=stop_reason,
            hold=hold,
        )

    @classmethod
    def tool_use(
        cls,
        calls: Sequence[tuple[str, Mapping[str, Any]] | tuple[str, Mapping[str, Any], str]],
        *,
        text: str = "",
        delay: float = 0,
        usage: Mapping[str, int] | None = None,
        hold: asyncio.Event | None = None,
    ) -> Reply:
        """Tool calls `(name, input)` or `(name, input, id)`, after optional text."""
        parsed: list[tuple[str, str, dict[str, Any]]] = []
        for call in calls:
            name, arguments = call[0], call[1]
            call_id = call[2] if len(call) == 3 else _new_id("toolu_")
            parsed.append((call_id, name, dict(arguments)))
        return cls(
            "tool_use",
            reply_text=text,
            calls=tuple(parsed),
            delay=delay,
            usage=usage,
            stop_reason="tool_use",
            hold=hold,
        )

    @classmethod
    def http_error(
        cls,
        status: int,
        error_type: str = "api_error",
        message: str = "Internal server error",
        retry_after: float | None = None,
    ) -> Reply:
        """A non-200 JSON error, optionally with a `retry-after` header (seconds)."""
        return cls(
            "http_error",
            status=status,
            error_type=error_type,
            message=message,
            retry_after=retry_after,
        )

    @classmethod
    def stream_error(cls, error_type: str = "overloaded_error", partial_text: str = "") -> Reply:
        """A 200 stream that starts (with `partial_text` deltas if given), then sends
        `event: error`. A non-streaming request gets the matching HTTP error instead."""
        return cls(
            "stream_error", error_type=error_type, message="Overloaded", partial_text=partial_text
        )

    @classmethod
    def hang(cls) -> Reply:
        """Accept and never answer, until the client disconnects or the server stops."""
        return cls("hang")

    @classmethod
    def stall(cls, partial_text: str, *, chunk: int = 0) -> Reply:
        """A 200 stream that sends the deltas of `partial_text`, then nothing more until the
        client goes away or the server stops (a model pausing mid-reply)."""
        return cls("stall", partial_text=partial_text, chunk=chunk)

    @classmethod
    def disconnect(cls, partial_text: str | None = None) -> Reply:
        """Drop the connection: before any response (None), or mid-stream after a 200
        `message_start` and the deltas of `partial_text`."""
        return cls("disconnect", partial_text=partial_text)


def last_user_text(body: Mapping[str, Any]) -> str:
    """The last text block of the last user message in a request body ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if b.get("type") == "text"]
        return texts[-1] if texts else ""
    return ""


def echo(body: dict[str, Any]) -> Reply:
    """The default reply: `echo: <last user text>`."""
    return Reply.text("echo: " + last_user_text(body))


_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "api_error": 500,
    "invalid_request_error": 400,
}


class FakeAnthropic:
    """`async with FakeAnthropic() as fake:` then point the SDK at `fake.base_url`.

    `api_key`, if given, must match the request's key (else 401). `sock`, if given, is a
    bound (not yet listening) socket to serve on instead of a fresh port-0 one.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        sock: socket.socket | None = None,
        cache: PromptCache | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = ""
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # the bodies as sent, byte for byte
        self.headers: list[dict[str, str]] = []
        self.cache = cache
        self.clock = clock
        self.default: Callable[[dict[str, Any]], Reply] = echo
        self.in_flight = 0
        self.max_in_flight = 0
        self._api_key = api_key
        self._sock = sock
        self._queue: list[Reply] = []
        self._runner: web.AppRunner | None = None
        self._changed: asyncio.Condition | None = None
        self._stopping: asyncio.Event | None = None

    # ---- lifecycle -------------------------------------------------------------------
    async def __aenter__(self) -> FakeAnthropic:
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site: web.BaseSite
        if self._sock is not None:
            site = web.SockSite(self._runner, self._sock)
        else:
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stopping is not None:
            self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ---- scripting -------------------------------------------------------------------
    def queue(self, *replies: Reply) -> None:
        """Scripted replies, consumed in order before `default` answers."""
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        return len(self._queue)

    async def wait_requests(self, n: int, timeout: float = 5) -> None:
        """Return once at least `n` message requests have arrived; TimeoutError otherwise."""
        assert self._changed is not None, "FakeAnthropic is not started (use `async with`)"
        try:
            async with asyncio.timeout(timeout):
                async with self._changed:
                    await self._changed.wait_for(lambda: len(self.requests) >= n)
        except TimeoutError:
            raise TimeoutError(
                f"FakeAnthropic received {len(self.requests)} of {n} expected requests "
                f"within {timeout} s"
            ) from None

    async def wait_idle(self, timeout: float = 5) -> None:
        """Return once no request is being answered (e.g. after a client disconnected)."""
        assert self._changed is not None, "FakeAnthropic is not started (use `async with`)"
        try:
            async with asyncio.timeout(timeout):
                async with self._changed:
                    await self._changed.wait_for(lambda: self.in_flight == 0)
        except TimeoutError:
            raise TimeoutError(
                f"FakeAnthropic still answering {self.in_flight} requests after {timeout} s"
            ) from None

    # ---- handlers --------------------------------------------------------------------
    async def _count_tokens(self, request: web.Request) -> web.StreamResponse:
        raw = await request.text()
        if (denied := self._check_auth(request)) is not None:
            return denied
        return web.json_response({"input_tokens": len(raw) // 4})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: dict[str, Any] = json.loads(raw)
        self.requests.append(body)
        self.raw.append(raw)
        self.headers.append(dict(request.headers))
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if (denied := self._check_auth(request)) is not None:
                return denied
            reply = self._queue.pop(0) if self._queue else self.default(body)
            if self.cache is not None and reply.kind in ("text", "tool_use"):
                try:
                    use = self.cache.account(body, self.clock())
                except CacheRuleError as exc:
                    return _error_response(400, "invalid_request_error", str(exc))
                reply = replace(reply, usage={**use.usage(), **(reply.usage or {})})
            return await self._answer(request, body, reply)
        finally:
            self.in_flight -= 1
            async with self._changed:
                self._changed.notify_all()

    def _check_auth(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("x-api-key")
        auth = request.headers.get("Authorization", "")
        if key is None and auth.startswith("Bearer "):
            key = auth.removeprefix("Bearer ")
        if not key:
            return _error_response(401, "authentication_error", "x-api-key header is required")
        if self._api_key is not None and key != self._api_key:
            return _error_response(401, "authentication_error", "invalid x-api-key")
        return None

    async def _answer(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        streaming = body.get("stream") is True
        if reply.kind == "http_error":
            return _error_response(reply.status, reply.error_type, reply.message, reply.retry_after)
        if reply.kind == "hang":
            assert self._stopping is not None
            await self._stopping.wait()
            return _error_response(529, "overloaded_error", "Fake server stopped")
        if reply.kind == "disconnect" and (reply.partial_text is None or not streaming):
            _drop(request)
            return web.Response()
        if reply.kind == "stream_error" and not streaming:
            status = _STREAM_ERROR_STATUS.get(reply.error_type, 500)
            return _error_response(status, reply.error_type, "Fake stream error")
        if not streaming:
            return web.json_response(_message_json(body, reply))
        return await self._stream(request, body, reply)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "request-id": _new_id("req_"),
            }
        )
        await response.prepare(request)
        usage = _usage(body, reply)
        start = _message_json(body, reply)
        start.update(content=[], stop_reason=None, stop_sequence=None)
        start["usage"] = {**usage, "output_tokens": 1}
        await _event(response, "message_start", {"type": "message_start", "message": start})
        await _event(response, "ping", {"type": "ping"})

        if reply.kind in ("stream_error", "disconnect"):
            if reply.partial_text:
                await _text_block(response, 0, reply.partial_text, reply.chunk, stop=False)
            if reply.kind == "disconnect":
                _drop(request)
                return response
            detail = {"type": reply.error_type, "message": reply.message or "Overloaded"}
            error = {"type": "error", "error": detail}
            await _event(response, "error", error)
            await response.write_eof()
            return response

        if reply.kind == "stall":
            await _text_block(response, 0, reply.partial_text or "", reply.chunk, stop=False)
            assert self._stopping is not None
            await self._stopping.wait()
            return response

        index = 0
        if reply.kind == "text" or reply.reply_text:
            await _text_block(response, index, reply.reply_text, reply.chunk, stop=True)
            index += 1
        for call_id, name, arguments in reply.calls:
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            await _event(
                response,
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
            encoded = json.dumps(arguments)
            half = len(encoded) // 2
            for piece in ("", encoded[:half], encoded[half:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                await _event(
                    response,
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            await _event(
                response, "content_block_stop", {"type": "content_block_stop", "index": index}
            )
            index += 1
        await _event(
            response,
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        await _event(response, "message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response


# ---- wire format ---------------------------------------------------------------------
def _error_response(
    status: int, error_type: str, message: str, retry_after: float | None = None
) -> web.Response:
    headers = {"request-id": _new_id("req_")}
    if retry_after is not None:
        headers["retry-after"] = (
            str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        )
    payload = {"type": "error", "error": {"type": error_type, "message": message}}
    return web.json_response(payload, status=status, headers=headers)


def _drop(request: web.Request) -> None:
    transport = request.transport
    if transport is not None:
        transport.abort()


def _usage(body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    prompt = json.dumps([body.get("system"), body.get("messages"), body.get("tools")])
    output = (
        len(reply.reply_text) // 4 + 1 + sum(len(json.dumps(c[2])) // 4 + 10 for c in reply.calls)
    )
    usage = {
        "input_tokens": max(1, len(prompt) // 4),
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    usage.update(reply.usage or {})
    return usage


def _message_json(body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.kind == "text" or reply.reply_text:
        content.append({"type": "text", "text": reply.reply_text})
    for call_id, name, arguments in reply.calls:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    return {
        "id": _new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _usage(body, reply),
    }


async def _event(response: web.StreamResponse, name: str, data: Mapping[str, Any]) -> None:
    await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())


async def _text_block(
    response: web.StreamResponse, index: int, text: str, chunk: int, *, stop: bool
) -> None:
    await _event(
        response,
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        },
    )
    size = chunk if chunk > 0 else max(len(text), 1)
    for start in range(0, len(text), size):
        delta = {"type": "text_delta", "text": text[start : start + size]}
        await _event(
            response,
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": delta},
        )
    if stop:
        await _event(response, "content_block_stop", {"type": "content_block_stop", "index": index})
