"""A fake Chat Completions API on 127.0.0.1 that the real `openai` SDK talks to.

It answers the same scripted `Reply`s as `tests.fakes.anthropic` (queue, then `default`), in
the Chat Completions wire format: SSE `data: {chunk}` lines ending with `data: [DONE]`,
content deltas, tool calls streamed as `delta.tool_calls[i]` pieces (id and name first,
arguments split over later pieces, several calls told apart by `index`), usage in a last
chunk with no choices when `stream_options.include_usage` is set, errors as
`{"error": {...}}` with status (and `retry-after`), a mid-stream error as an error object in
the stream. `reasoning` (if set) is streamed as `reasoning_content` and `reasoning` deltas
before every answer, as DeepSeek and vLLM do. `GET /v1/models` lists `models`.
`POST /v1/embeddings` answers deterministic vectors (`tests/fakes/openai_embeddings.py`;
`fake.embeddings` holds its requests and scripted fault).
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from aiohttp import web

from tests.fakes.anthropic import Reply, _new_id
from tests.fakes.openai_embeddings import Embeddings

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


def last_user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a Chat Completions body ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content.split("\n\n")[-1]
        texts = [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        return texts[-1] if texts else ""
    return ""


def echo(body: dict[str, Any]) -> Reply:
    return Reply.text("echo: " + last_user_text(body))


class FakeOpenAI:
    """`async with FakeOpenAI() as fake:` then `AsyncOpenAI(base_url=fake.base_url)`.

    `sock`, if given, is a bound (not yet listening) socket to serve on instead of a fresh
    port-0 one."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        models: tuple[str, ...] = (),
        sock: socket.socket | None = None,
    ) -> None:
        self.base_url = ""
        self._sock = sock
        self.requests: list[dict[str, Any]] = []
        self.raw: list[bytes] = []  # the bodies as sent, byte for byte
        self.headers: list[dict[str, str]] = []
        self.default: Callable[[dict[str, Any]], Reply] = echo
        self.models = list(models) or ["qwen3:8b", "gpt-test"]
        self.reasoning = ""
        self.embeddings = Embeddings()
        self.in_flight = 0
        self._api_key = api_key
        self._queue: list[Reply] = []
        self._runner: web.AppRunner | None = None
        self._changed: asyncio.Condition | None = None
        self._stopping: asyncio.Event | None = None

    async def __aenter__(self) -> FakeOpenAI:
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/embeddings", self._embeddings)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site: web.BaseSite
        if self._sock is not None:
            site = web.SockSite(self._runner, self._sock)
        else:
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
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

    def queue(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        return len(self._queue)

    async def wait_requests(self, n: int, timeout: float = 5) -> None:
        assert self._changed is not None, "FakeOpenAI is not started (use `async with`)"
        try:
            async with asyncio.timeout(timeout):
                async with self._changed:
                    await self._changed.wait_for(lambda: len(self.requests) >= n)
        except TimeoutError:
            raise TimeoutError(
                f"FakeOpenAI received {len(self.requests)} of {n} expected requests "
                f"within {timeout} s"
            ) from None

    # ---- handlers --------------------------------------------------------------------
    def _denied(self, request: web.Request) -> web.Response | None:
        auth = request.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else ""
        if not key or (self._api_key is not None and key != self._api_key):
            return _error(401, "Incorrect API key provided.", code="invalid_api_key")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _embeddings(self, request: web.Request) -> web.Response:
        if (denied := self._denied(request)) is not None:
            return denied
        return await self.embeddings.answer(json.loads(await request.read()))

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: dict[str, Any] = json.loads(raw)
        self.requests.append(body)
        self.raw.append(raw)
        self.headers.append(dict(request.headers))
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()
        self.in_flight += 1
        try:
            if (denied := self._denied(request)) is not None:
                return denied
            reply = self._queue.pop(0) if self._queue else self.default(body)
            return await self._answer(request, body, reply)
        finally:
            self.in_flight -= 1
            async with self._changed:
                self._changed.notify_all()

    async def _answer(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay > 0:
            await asyncio.sleep(reply.delay)
        if reply.kind == "http_error":
            status = 429 if reply.error_type == "rate_limit_error" else reply.status
            return _error(status, reply.message, retry_after=reply.retry_after)
        if reply.kind == "hang":
            assert self._stopping is not None
            await self._stopping.wait()
            return _error(503, "Fake server stopped")
        if reply.kind == "disconnect" and reply.partial_text is None:
            _drop(request)
            return web.Response()
        if body.get("stream") is not True:
            return _error(400, "this fake only streams")
        return await self._stream(request, body, reply)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        chunk_id = _new_id("chatcmpl-")
        model = str(body.get("model", ""))

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            await _data(response, _chunk(chunk_id, model, [choice]))

        await send({"role": "assistant", "content": ""})
        if self.reasoning:
            await send({"reasoning_content": self.reasoning})
            await send({"reasoning": self.reasoning})
        text = reply.partial_text if reply.kind in ("stream_error", "disconnect", "stall") else None
        text = reply.reply_text if text is None else text
        size = reply.chunk if reply.chunk > 0 else max(len(text), 1)
        for start in range(0, len(text), size):
            await send({"content": text[start : start + size]})
        if reply.kind == "disconnect":
            _drop(request)
            return response
        if reply.kind == "stall":  # a model pausing mid-reply until the client goes away
            assert self._stopping is not None
            await self._stopping.wait()
            return response
        if reply.kind == "stream_error":
            error = {"message": reply.message or "Overloaded", "type": reply.error_type}
            await _data(response, {"error": error})
            await response.write_eof()
            return response
        for index, (call_id, name, arguments) in enumerate(reply.calls):
            first = {"index": index, "id": call_id, "type": "function"}
            await send({"tool_calls": [{**first, "function": {"name": name, "arguments": ""}}]})
            encoded = json.dumps(arguments)
            half = len(encoded) // 2
            for piece in (encoded[:half], encoded[half:]):
                await send({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        finish = "tool_calls" if reply.calls else "stop"
        stops = {"max_tokens": "length", "refusal": "content_filter"}
        await send({}, stops.get(reply.stop_reason, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            await _data(response, _chunk(chunk_id, model, [], usage=_usage(body, reply)))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _chunk(
    chunk_id: str, model: str, choices: list[dict[str, Any]], usage: Any = None
) -> dict[str, Any]:
    return {
        "id": chunk_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _usage(body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    prompt = max(1, len(json.dumps(body.get("messages"))) // 4)
    completion = len(reply.reply_text) // 4 + 1 + 10 * len(reply.calls)
    cached = int((reply.usage or {}).get("cache_read_input_tokens", 0))
    prompt = int((reply.usage or {}).get("input_tokens", prompt)) + cached
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _error(
    status: int, message: str, *, code: str | None = None, retry_after: float | None = None
) -> web.Response:
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["retry-after"] = (
            str(int(retry_after)) if float(retry_after).is_integer() else str(retry_after)
        )
    kind = _ERROR_TYPES.get(status, "server_error")
    payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(payload, status=status, headers=headers)


async def _data(response: web.StreamResponse, payload: Mapping[str, Any]) -> None:
    await response.write(f"data: {json.dumps(payload)}\n\n".encode())


def _drop(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
