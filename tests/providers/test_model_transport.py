"""The model SDKs on their own aiohttp clients, as the providers build them.

A raw HTTP/1.1 server on 127.0.0.1 answers with bytes each test chooses. For every way a
server can fail, each SDK on its aiohttp client must fail the way it does on its default
httpx2 client, as the provider's `classify` reads it (the retry policy and the user's
message hang on that). Streams must be handed on as they arrive, and what real servers do
(gzip, chunked, 1xx, idle connections closed, TLS names, proxies) must read right.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from agents.model import ModelError, ModelRequest
from agents.providers import anthropic as anthropic_provider
from agents.providers import openai as openai_provider
from agents.providers.anthropic import AnthropicClient
from agents.providers.retry import Failure
from tests.certificates import self_signed
from tests.fakes.blackhole import unaccepting_port
from tests.fakes.raw_http import Answer, RawServer, Seen, reply

pytestmark = pytest.mark.timeout(30)

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
PING = b'event: ping\ndata: {"type": "ping"}\n\n'
CHUNK = b'data: {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": []}\n\n'


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(n: int) -> bytes:
    return chunk(b"event: delta\ndata: " + json.dumps({"n": n}).encode() + b"\n\n")


def sse_events(text: str) -> list[bytes]:
    """The events of a whole Messages API stream answering `text`, unframed."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    }
    block = {"type": "text", "text": ""}
    delta = {"type": "text_delta", "text": text}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def message_stream(text: str) -> list[bytes]:
    """That stream as the pieces of a chunked answer, the last chunk included."""
    return [*(chunk(e) for e in sse_events(text)), b"0\r\n\r\n"]


# -- the same failure, read the same way -----------------------------------------------------

SDKS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = {
    # name: (client class, its aiohttp client, classify)
    "anthropic": (
        anthropic.AsyncAnthropic,
        anthropic.DefaultAioHttpClient,
        anthropic_provider.classify,
    ),
    "openai": (openai.AsyncOpenAI, openai.DefaultAioHttpClient, openai_provider.classify),
}
FAILURES = {
    "closed before answering": lambda sdk: Answer([], close=True),
    "reset before answering": lambda sdk: Answer([], reset=True),
    "closed mid-head": lambda sdk: Answer([b"HTTP/1.1 200 OK\r\nContent-Le"], close=True),
    "closed mid-body": lambda sdk: Answer([SSE_HEAD, chunk(_first(sdk))], close=True),
    "not HTTP": lambda sdk: Answer([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"], close=True),
    "stalled": lambda sdk: Answer([SSE_HEAD, chunk(_first(sdk))], hold=True),
}
EXPECTED = {  # (kind, retryable, unreachable)
    "refused": ("connection", True, True),
    "blackholed": ("connection", True, True),
    "stalled": ("timeout", True, False),
    **{name: ("connection", True, False) for name in FAILURES if name != "stalled"},
}


def _first(sdk: str) -> bytes:
    return PING if sdk == "anthropic" else CHUNK


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("failure", [*FAILURES, "refused", "blackholed"])
async def test_every_failure_reads_as_it_does_on_the_sdks_httpx2_client(
    sdk: str, failure: str
) -> None:
    make, aiohttp_client, classify = SDKS[sdk]
    outcomes = []
    for http_client in (httpx2.AsyncClient(), aiohttp_client()):
        outcomes.append(await _failure_of(sdk, make, http_client, classify, failure))
    on_httpx2, on_aiohttp = outcomes
    assert on_aiohttp == on_httpx2 == EXPECTED[failure]


async def _failure_of(
    sdk: str, make: Callable[..., Any], http: Any, classify: Any, failure: str
) -> tuple[object, ...]:
    timeout = httpx2.Timeout(5, connect=0.3, read=0.3)

    async def script(seen: Seen) -> Answer:
        return FAILURES[failure](sdk)  # type: ignore[no-any-return]

    async def call(url: str) -> None:
        client = make(api_key="k", base_url=url, max_retries=0, timeout=timeout, http_client=http)
        try:
            if sdk == "anthropic":
                messages: Any = [{"role": "user", "content": "hi"}]
                async with client.messages.stream(
                    model="m", max_tokens=5, messages=messages
                ) as stream:
                    async for _ in stream:
                        pass
            else:
                chunks = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}], stream=True
                )
                async for _ in chunks:
                    pass
        finally:
            await client.close()

    try:
        if failure == "refused":
            with socket.socket() as s:  # bound, not listening
                s.bind(("127.0.0.1", 0))
                await call(f"http://127.0.0.1:{s.getsockname()[1]}/v1")
        elif failure == "blackholed":
            with unaccepting_port() as port:
                await call(f"http://127.0.0.1:{port}/v1")
        else:
            async with RawServer(script) as raw:
                await call(f"{raw.url}/v1")
    except Exception as exc:
        seen: Failure | None = classify(exc)
        assert seen is not None, f"{failure}: {exc!r} not classified"
        return (seen.kind, seen.retryable, seen.unreachable)
    raise AssertionError(f"{failure}: no error")


# -- streams and what real servers do --------------------------------------------------------


async def test_a_streamed_answer_is_handed_on_as_it_arrives() -> None:
    more = asyncio.Event()

    def script(seen: Seen) -> Answer:
        if seen.target == "/stream":  # the rest only once the client has read the first event
            return Answer([SSE_HEAD, event(1)], after=more, more=[event(2), event(3), b"0\r\n\r\n"])
        return Answer([reply({"ok": True})])

    async with RawServer(script) as raw, anthropic.DefaultAioHttpClient() as http:
        async with http.stream("POST", f"{raw.url}/stream", content=b"{}") as response:
            pieces = response.aiter_bytes()
            assert b'"n": 1' in await anext(pieces)  # before the server sent the rest
            more.set()
            rest = b"".join([piece async for piece in pieces])
        assert b'"n": 2' in rest and b'"n": 3' in rest
        assert (await http.post(f"{raw.url}/again", content=b"{}")).json() == {"ok": True}
        assert raw.connections == 1  # read to its end, the connection carried the next call


async def test_the_read_timeout_is_per_wait_not_for_the_whole_answer() -> None:
    async def trickle(seen: Seen) -> Answer:
        return Answer([SSE_HEAD, *[event(n) for n in range(6)], b"0\r\n\r\n"])

    async with (
        RawServer(trickle, delay=0.1) as raw,  # 0.1 s before each piece: 0.8 s in all
        openai.DefaultAioHttpClient() as http,
    ):
        timeout = httpx2.Timeout(5, read=0.5)
        response = await http.post(f"{raw.url}/t", content=b"{}", timeout=timeout)
        assert response.content.count(b"event: delta") == 6


async def test_an_answer_left_half_read_never_serves_the_next_call() -> None:
    async def script(seen: Seen) -> Answer:
        if seen.target == "/long":
            return Answer([SSE_HEAD, event(1)], hold=True)
        return Answer([reply({"fresh": True})])

    async with RawServer(script) as raw, anthropic.DefaultAioHttpClient() as http:
        async with http.stream("POST", f"{raw.url}/long", content=b"{}") as response:
            async for _ in response.aiter_bytes():
                break  # the reader gives up (a /stop) with the answer unfinished
        assert (await http.post(f"{raw.url}/next", content=b"{}")).json() == {"fresh": True}
        assert raw.connections == 2


def _request(text: str = "hi") -> ModelRequest:
    return ModelRequest(
        model="claude-test",
        system=[{"type": "text", "text": "You are Perch."}],
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
    )


async def test_gzip_chunked_1xx_and_idle_closed_connections_through_the_provider() -> None:
    def script(seen: Seen) -> Answer:
        n = len(raw.seen)
        if n == 1:  # a 1xx first, then the stream, chunked
            return Answer([b"HTTP/1.1 100 Continue\r\n\r\n", SSE_HEAD, *message_stream("one")])
        packed = gzip.compress(b"".join(sse_events("two")))  # gzipped, with a length
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(packed)}\r\n\r\n"
        )
        return Answer([head.encode(), packed])

    async with RawServer(script) as raw:
        client = AnthropicClient("k", raw.url, max_attempts=1)
        try:
            assert (await client.complete(_request())).content == [{"type": "text", "text": "one"}]
            assert (await client.complete(_request())).content == [{"type": "text", "text": "two"}]
            assert "gzip" in raw.seen[1].headers["accept-encoding"]
            assert raw.connections == 1
            assert await raw.close_idle() == 1  # the server's keep-alive time is up
            assert (await client.complete(_request())).content == [{"type": "text", "text": "two"}]
        finally:
            await client.aclose()
    assert [s.conn for s in raw.seen] == [1, 1, 2]


async def test_tls_trusts_ssl_cert_file_and_refuses_a_certificate_for_another_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def script(seen: Seen) -> Answer:
        return Answer([SSE_HEAD, *message_stream("secure")])

    for name, works in (("127.0.0.1", True), ("api.perch.test", False)):
        cert, key = self_signed(tmp_path / name, name)
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(cert, key)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read when the client is made
        async with RawServer(script, tls=tls) as raw:
            client = AnthropicClient("k", raw.url, max_attempts=1)
            try:
                if works:
                    reply_ = await client.complete(_request())
                    assert reply_.content == [{"type": "text", "text": "secure"}]
                else:
                    with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED"):
                        await client.complete(_request())
                    assert raw.seen == []
            finally:
                await client.aclose()


async def test_a_proxy_variable_sends_the_sdk_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def script(seen: Seen) -> Answer:
        return Answer([SSE_HEAD, *message_stream("proxied")])

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with RawServer(script) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        client = AnthropicClient("k", "http://api.anthropic.test", max_attempts=1)
        try:
            reply_ = await client.complete(_request())
        finally:
            await client.aclose()
    assert reply_.content == [{"type": "text", "text": "proxied"}]
    assert proxy.seen[0].target == "http://api.anthropic.test/v1/messages"
