"""`http11` and the model SDKs' transport on it (`agents/providers/transport.py`).

A raw HTTP/1.1 server on 127.0.0.1 answers with bytes each test chooses. httpx2's own default
transport is the reference: for every way a server can fail, the SDK must see a failure of
the same kind (`agents.providers.anthropic.classify`) through either transport. The parser
is fed answers split at arbitrary points, and arbitrary bytes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import AsyncIterator

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.providers.anthropic import classify
from agents.providers.transport import LeanTransport, lean_http_client
from http11 import pool
from http11.connection import BadAnswer, Connection
from tests.fakes.blackhole import unaccepting_port
from tests.fakes.raw_http import Answer, RawServer, Seen, reply

pytestmark = pytest.mark.timeout(20)

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(n: int) -> bytes:
    return chunk(b"event: delta\ndata: " + json.dumps({"n": n}).encode() + b"\n\n")


@pytest.fixture
async def lean() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(transport=LeanTransport(size=4)) as client:
        yield client


async def test_a_streamed_answer_is_handed_on_as_it_arrives(lean: httpx2.AsyncClient) -> None:
    more = asyncio.Event()

    def script(seen: Seen) -> Answer:
        if seen.target == "/stream":  # the rest only once the client has read the first event
            return Answer([SSE_HEAD, event(1)], after=more, more=[event(2), event(3), b"0\r\n\r\n"])
        return Answer([reply({"ok": True})])

    async with RawServer(script) as raw:
        async with lean.stream("POST", f"{raw.url}/stream", content=b"{}") as response:
            pieces = response.aiter_bytes()
            assert b'"n": 1' in await anext(pieces)  # before the server sent the rest
            more.set()
            rest = b"".join([piece async for piece in pieces])
        assert b'"n": 2' in rest and b'"n": 3' in rest
        assert (await lean.post(f"{raw.url}/again", content=b"{}")).json() == {"ok": True}
        assert raw.connections == 1  # read to its end, the connection carried the next call


async def test_the_read_timeout_is_per_wait_not_for_the_whole_answer(
    lean: httpx2.AsyncClient,
) -> None:
    async def trickle(seen: Seen) -> Answer:
        return Answer([SSE_HEAD, *[event(n) for n in range(6)], b"0\r\n\r\n"])

    async with RawServer(trickle, delay=0.1) as raw:  # 0.1 s before each piece: 0.8 s in all
        timeout = httpx2.Timeout(5, read=0.5)
        response = await lean.post(f"{raw.url}/t", content=b"{}", timeout=timeout)
        assert response.content.count(b"event: delta") == 6

    async def stall(seen: Seen) -> Answer:
        return Answer([SSE_HEAD, event(1)], hold=True)

    async with RawServer(stall) as raw:
        with pytest.raises(httpx2.ReadTimeout):
            await lean.post(f"{raw.url}/t", content=b"{}", timeout=httpx2.Timeout(5, read=0.2))


async def test_an_answer_left_half_read_never_serves_the_next_call(
    lean: httpx2.AsyncClient,
) -> None:
    async def script(seen: Seen) -> Answer:
        if seen.target == "/long":
            return Answer([SSE_HEAD, event(1)], hold=True)
        return Answer([reply({"fresh": True})])

    async with RawServer(script) as raw:
        async with lean.stream("POST", f"{raw.url}/long", content=b"{}") as response:
            async for _ in response.aiter_bytes():
                break  # the reader gives up (a /stop) with the answer unfinished
        assert (await lean.post(f"{raw.url}/next", content=b"{}")).json() == {"fresh": True}
        assert raw.connections == 2


async def test_a_server_faster_than_its_reader_waits_in_the_kernel_not_in_memory() -> None:
    body = bytes(range(256)) * (32 * 1024)  # 8 MiB, sent as fast as the socket takes it

    def script(seen: Seen) -> Answer:
        return Answer([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body])

    async with RawServer(script) as raw:
        conns = pool.Pool(1, lambda: None)  # type: ignore[arg-type, return-value]
        origin = pool.Origin("http", "127.0.0.1", raw.port)
        conn = await conns.checkout(origin, pool.Timeouts(5, 5, 5, 5))
        await conn.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 5)
        most = 0
        received = conn.data_received

        def watched(data: bytes) -> None:
            nonlocal most
            received(data)
            most = max(most, len(conn._buf))

        conn.data_received = watched  # type: ignore[method-assign]
        head = await conn.head(5)
        got = bytearray()
        async for piece in conn.body(head, 5):
            got += piece
            await asyncio.sleep(0.02)  # a slow reader: the server could send it all meanwhile
        conns.checkin(origin, conn)
        conns.close()
    assert got == body
    assert most < 1024 * 1024  # READ_HIGH (256 KiB) and one read past it, not 8 MiB


def _refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1/messages"  # closed: refused


FAILURES = {
    "closed before answering": Answer([], close=True),
    "closed mid-head": Answer([b"HTTP/1.1 200 OK\r\nContent-Le"], close=True),
    "closed mid-body": Answer([SSE_HEAD, event(1)], close=True),
    "not HTTP": Answer([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"], close=True),
}


@pytest.mark.parametrize("failure", [*FAILURES, "refused", "blackholed", "stalled"])
async def test_every_failure_reads_to_the_sdk_as_it_does_through_httpx2(failure: str) -> None:
    outcomes = []
    for transport in (httpx2.AsyncHTTPTransport(), LeanTransport()):
        async with httpx2.AsyncClient(transport=transport) as client:
            outcomes.append(await _failure_of(client, failure))
    ours, theirs = outcomes[1], outcomes[0]
    assert ours == theirs
    assert ours[0] in ("connection", "timeout")


async def _failure_of(client: httpx2.AsyncClient, failure: str) -> tuple[object, ...]:
    timeout = httpx2.Timeout(5, connect=0.3, read=0.3)

    async def script(seen: Seen) -> Answer:
        return Answer([SSE_HEAD], hold=True) if failure == "stalled" else FAILURES[failure]

    try:
        if failure == "refused":
            await client.post(_refused_url(), content=b"{}", timeout=timeout)
        elif failure == "blackholed":
            with unaccepting_port() as port:
                await client.post(f"http://127.0.0.1:{port}/", content=b"{}", timeout=timeout)
        else:
            async with RawServer(script) as raw:
                await client.post(f"{raw.url}/v1/messages", content=b"{}", timeout=timeout)
    except httpx2.TransportError as exc:
        seen = classify(exc)
        assert seen is not None
        return (seen.kind, seen.retryable, seen.unreachable)
    raise AssertionError(f"{failure}: no error")


async def test_a_full_pool_times_out_as_httpx2_says_it() -> None:
    async def hold(seen: Seen) -> Answer:
        return Answer([], hold=True)

    async with RawServer(hold) as raw, httpx2.AsyncClient(transport=LeanTransport(size=1)) as c:
        first = asyncio.create_task(c.post(f"{raw.url}/a", content=b"{}"))
        await raw.until_seen(1)
        with pytest.raises(httpx2.PoolTimeout):
            await c.post(f"{raw.url}/b", content=b"{}", timeout=httpx2.Timeout(5, pool=0.1))
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(raw.seen) == 1


def test_a_proxy_variable_leaves_the_sdk_its_own_client(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    pool.proxied.cache_clear()
    try:
        assert lean_http_client("https://api.anthropic.com", httpx2.AsyncClient) is not None
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
        pool.proxied.cache_clear()
        assert lean_http_client("https://api.anthropic.com", httpx2.AsyncClient) is None
        monkeypatch.setenv("NO_PROXY", "api.anthropic.com")
        pool.proxied.cache_clear()
        assert lean_http_client("https://api.anthropic.com", httpx2.AsyncClient) is not None
    finally:
        pool.proxied.cache_clear()


def test_perch_http11_0_gives_every_call_back_to_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    from channels.telegram.keepalive import KeepAliveRequest

    url = "http://127.0.0.1:9/bot1:x/sendMessage"
    assert KeepAliveRequest().takes(url, "POST", None)
    assert lean_http_client("http://127.0.0.1:9", httpx2.AsyncClient) is not None
    monkeypatch.setenv("PERCH_HTTP11", "0")
    assert not KeepAliveRequest().takes(url, "POST", None)
    assert lean_http_client("http://127.0.0.1:9", httpx2.AsyncClient) is None


# -- the parser ------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    body=st.binary(max_size=3000),
    chunked=st.booleans(),
    size=st.integers(1, 400),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
    status=st.sampled_from([200, 400, 429, 502]),
)
def test_an_answer_split_anywhere_reads_the_same(
    body: bytes, chunked: bool, size: int, cuts: list[int], status: int
) -> None:
    if chunked:
        framed = b"".join(chunk(body[i : i + size]) for i in range(0, len(body), size))
        wire = b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n" % (status, framed)
    else:
        wire = b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)
    assert asyncio.run(_feed(_split(wire, cuts), eof=False)) == (status, True, body)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_an_answer_or_a_bad_answer(data: bytes) -> None:
    try:
        status, _, _ = asyncio.run(_feed([b"HTTP/1.1 200 OK\r\n", data], eof=True))
    except BadAnswer:
        return
    assert status == 200


async def _feed(pieces: list[bytes], *, eof: bool) -> tuple[int, bool, bytes]:
    conn = Connection()

    async def read() -> tuple[int, bool, bytes]:
        head = await conn.head(None)
        body = await conn.read_body(head, None, limit=1 << 20)
        return head.status, conn.keep, body

    reading = asyncio.create_task(read())
    for piece in pieces:
        await asyncio.sleep(0)  # the reader runs until it needs more
        conn.data_received(piece)
    if eof:
        conn.eof_received()
    async with asyncio.timeout(5):
        return await reading


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]
