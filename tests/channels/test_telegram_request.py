"""PTB's Bot API calls over aiohttp (`channels/telegram/request.py`).

A raw HTTP/1.1 server on 127.0.0.1 answers each request with bytes the test chooses, so the
request class meets what real servers do: chunked and gzipped answers, 1xx answers before
the real one, idle connections closed, answers late, malformed or reset, TLS. The real
`telegram.Bot` drives it; PTB's own httpx request is the reference for what goes on the
wire, and the fake Bot API for uploads, downloads and PTB's error types.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from telegram import Bot, InputFile
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut
from telegram.request import HTTPXRequest, RequestData
from telegram.request._requestparameter import RequestParameter

from channels.telegram.request import AiohttpRequest
from tests.certificates import self_signed
from tests.fakes.blackhole import unaccepting_port
from tests.fakes.raw_http import Answer, RawServer, Seen, reply
from tests.fakes.telegram import FakeTelegram

pytestmark = pytest.mark.timeout(20)

TOKEN = "123:abc"
ME = {"id": 123, "is_bot": True, "first_name": "Perch", "username": "perch_bot"}


def bot_answer(seen: Seen) -> Answer:
    result: object = ME if seen.target.endswith("/getMe") else True
    return Answer([reply({"ok": True, "result": result})])


@pytest.fixture
async def server() -> AsyncIterator[RawServer]:
    async with RawServer(bot_answer) as raw:
        yield raw


@pytest.fixture
async def request_() -> AsyncIterator[AiohttpRequest]:
    async with AiohttpRequest(connection_pool_size=4) as request:
        yield request


async def test_calls_go_on_the_wire_as_httpx_sends_them_and_share_a_connection(
    server: RawServer,
) -> None:
    text = "héllo & <b>bye</b> = 100%"
    for request in (HTTPXRequest(), AiohttpRequest()):
        async with Bot(TOKEN, base_url=f"{server.url}/bot", request=request) as bot:
            await bot.send_chat_action(42, "typing", message_thread_id=7)
            await bot.set_my_commands([("stop", "stop the run")])
            await bot.set_chat_description(42, text)
    by_httpx, ours = server.seen[:4], server.seen[4:]
    assert [s.target for s in ours] == [s.target for s in by_httpx]
    assert ours[3].form() == {"chat_id": ["42"], "description": [text]}
    for theirs, mine in zip(by_httpx, ours, strict=True):
        assert (mine.method, mine.body) == (theirs.method, theirs.body)
        for header in ("content-type", "user-agent", "host"):
            assert mine.headers.get(header) == theirs.headers.get(header)
    assert {s.conn for s in ours} == {ours[0].conn}  # getMe and the three calls: one connection


async def test_chunked_and_gzipped_answers_are_read_whole(request_: AiohttpRequest) -> None:
    def script(seen: Seen) -> Answer:
        n = seen.form()["n"][0]
        body = json.dumps({"ok": True, "result": n * 3000}).encode()
        if n == "1":  # chunked, with chunk extensions, cut anywhere, with a trailer
            chunks = [body[i : i + 700] for i in range(0, len(body), 700)]
            framed = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(c), c) for c in chunks)
            return Answer(
                [
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                    *[framed[i : i + 333] for i in range(0, len(framed), 333)],
                    b"0\r\nX-Trailer: yes\r\n\r\n",
                ]
            )
        packed = gzip.compress(body)
        if n == "2":  # gzip with a length
            head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(packed)}\r\n\r\n"
            return Answer([head.encode(), packed])
        framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(packed), packed)  # gzip and chunked
        head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        return Answer([head, framed])

    async with RawServer(script) as raw:
        for n in ("1", "2", "3", "1"):
            assert await request_.post(raw.api("x"), _form(n=n)) == n * 3000
        assert raw.connections == 1
        assert "gzip" in raw.seen[0].headers["accept-encoding"]


async def test_informational_answers_before_the_real_one_are_skipped(
    request_: AiohttpRequest,
) -> None:
    def script(seen: Seen) -> Answer:
        return Answer(
            [
                b"HTTP/1.1 100 Continue\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
                reply({"ok": True, "result": "after the 1xx"}),
            ]
        )

    async with RawServer(script) as raw:
        assert await request_.post(raw.api("x"), _form(n="1")) == "after the 1xx"
        assert await request_.post(raw.api("x"), _form(n="2")) == "after the 1xx"
        assert raw.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_replaced(
    request_: AiohttpRequest,
) -> None:
    def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "close-header":
            return Answer([reply({"ok": True, "result": 1}, extra="Connection: close\r\n")])
        if seen.form()["n"][0] == "until-eof":  # no length: the body ends with the connection
            return Answer([b'HTTP/1.1 200 OK\r\n\r\n{"ok": true, "result": 2}'], close=True)
        return Answer([reply({"ok": True, "result": 3})])

    async with RawServer(script) as raw:
        assert await request_.post(raw.api("x"), _form(n="close-header")) == 1
        assert await request_.post(raw.api("x"), _form(n="until-eof")) == 2
        assert await request_.post(raw.api("x"), _form(n="kept")) == 3
        assert await request_.post(raw.api("x"), _form(n="kept")) == 3  # reused
        # The server's keep-alive time is up: it closes the idle connection, the client
        # notices, and the next call opens a fresh one instead of failing on the dead one.
        assert await raw.close_idle() == 1
        assert await request_.post(raw.api("x"), _form(n="kept")) == 3
        assert await request_.post(raw.api("x"), _form(n="kept")) == 3
    assert [s.conn for s in raw.seen] == [1, 2, 3, 3, 4, 4]


async def test_the_long_poll_gets_its_own_timeout_on_top_of_the_read_timeout() -> None:
    async def script(seen: Seen) -> Answer:
        if seen.target.endswith("/getUpdates"):  # a long poll that ends with nothing new
            await asyncio.sleep(float(seen.form()["timeout"][0]))
            return Answer([reply({"ok": True, "result": []})])
        return bot_answer(seen)

    async with RawServer(script) as raw:
        request = AiohttpRequest(read_timeout=0.3)
        async with Bot(TOKEN, base_url=f"{raw.url}/bot", request=request) as bot:
            assert await bot.get_updates(timeout=1) == ()  # waited 1 s, read timeout 0.3 s
        async with request:
            with pytest.raises(TimedOut):  # the same wait without the poll's share times out
                await request.post(raw.api("getUpdates"), _form(timeout="1"))


async def test_a_late_answer_times_out_and_never_answers_the_next_call() -> None:
    release = asyncio.Event()

    async def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "slow":
            await release.wait()
            return Answer([reply({"ok": True, "result": "late"})])
        return Answer([reply({"ok": True, "result": "fresh"})])

    async with RawServer(script) as raw, AiohttpRequest(read_timeout=0.2) as request:
        with pytest.raises(TimedOut):
            await request.post(raw.api("x"), _form(n="slow"))
        release.set()
        assert await request.post(raw.api("x"), _form(n="next")) == "fresh"
        assert raw.connections == 2


async def test_a_cancelled_call_leaves_no_half_read_connection_behind(
    request_: AiohttpRequest,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "hang":
            started.set()
            await release.wait()
            return Answer([reply({"ok": True, "result": "stale"})])
        return Answer([reply({"ok": True, "result": "mine"})])

    async with RawServer(script) as raw:
        call = asyncio.create_task(request_.post(raw.api("x"), _form(n="hang")))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        release.set()
        assert await request_.post(raw.api("x"), _form(n="next")) == "mine"
        assert raw.connections == 2


async def test_a_full_pool_times_out_without_sending() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def script(seen: Seen) -> Answer:
        started.set()
        await release.wait()
        return Answer([reply({"ok": True, "result": True})])

    async with (
        RawServer(script) as raw,
        AiohttpRequest(connection_pool_size=1, pool_timeout=0.1) as request,
    ):
        first = asyncio.create_task(request.post(raw.api("x"), _form(n="1")))
        await started.wait()
        with pytest.raises(TimedOut, match="Pool timeout"):
            await request.post(raw.api("x"), _form(n="2"))
        release.set()
        assert await first is True
        assert len(raw.seen) == 1  # the second was never sent


@pytest.mark.parametrize(
    "garbage",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 2OO OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000,
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short",
    ],
)
async def test_a_malformed_answer_is_a_network_error_and_the_next_call_works(
    garbage: bytes, request_: AiohttpRequest
) -> None:
    def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "bad":
            return Answer([garbage], close=True)
        return Answer([reply({"ok": True, "result": "ok"})])

    async with RawServer(script) as raw:
        with pytest.raises(NetworkError) as caught:
            await request_.post(raw.api("x"), _form(n="bad"))
        assert not isinstance(caught.value, TimedOut)
        assert TOKEN not in str(caught.value)
        assert await request_.post(raw.api("x"), _form(n="good")) == "ok"


async def test_a_reset_refused_or_unanswered_connection_is_ptbs_own_error(
    request_: AiohttpRequest,
) -> None:
    def script(seen: Seen) -> Answer:
        return Answer([], reset=True)

    async with RawServer(script) as raw:
        with pytest.raises(NetworkError, match="aiohttp"):
            await request_.post(raw.api("x"), _form(n="1"))
    with socket.socket() as s:  # bound, never listening: refused
        s.bind(("127.0.0.1", 0))
        with pytest.raises(NetworkError, match="Cannot connect"):
            await request_.post(f"http://127.0.0.1:{s.getsockname()[1]}/bot{TOKEN}/getMe")
    with unaccepting_port() as port, pytest.raises(TimedOut) as caught:
        await request_.post(f"http://127.0.0.1:{port}/bot{TOKEN}/getMe", connect_timeout=0.3)
    assert TOKEN not in str(caught.value)  # aiohttp's text names the URL: cut to the origin
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_an_upload_the_server_stops_reading_times_out_instead_of_hanging() -> None:
    with socket.socket() as listener:  # accepts (in the kernel) and never reads
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/bot{TOKEN}/sendDocument"
        document = InputFile(b"x" * (32 << 20), filename="big.bin")
        data = RequestData(
            [
                RequestParameter.from_input("chat_id", 42),
                RequestParameter.from_input("document", document),
            ]
        )
        async with AiohttpRequest(media_write_timeout=0.5) as request:
            with pytest.raises(TimedOut):
                await request.post(url, data)


async def test_flood_waits_and_refusals_reach_ptb_as_its_own_errors() -> None:
    async with (
        FakeTelegram() as tg,
        Bot(tg.token, base_url=tg.base_url, request=AiohttpRequest()) as bot,
    ):
        tg.fail_next("sendMessage", 429, retry_after=7)
        with pytest.raises(RetryAfter) as flood:
            await bot.send_message(42, "hi")
        assert flood.value.retry_after == datetime.timedelta(seconds=7)
        tg.fail_next("sendMessage", 400, description="Bad Request: chat not found")
        with pytest.raises(BadRequest, match=r"(?i)chat not found"):
            await bot.send_message(42, "hi")
        tg.fail_next("sendMessage", 403, description="Forbidden: bot was blocked")
        with pytest.raises(Forbidden, match="blocked"):
            await bot.send_message(42, "hi")
        tg.fail_next("sendMessage", 502, html="<html>Bad Gateway</html>")
        with pytest.raises(NetworkError):
            await bot.send_message(42, "hi")
        assert (await bot.send_message(42, "hi")).text == "hi"


async def test_uploads_and_downloads_go_through_the_same_session() -> None:
    async with FakeTelegram() as tg:
        tg.add_file("f1", b"voice bytes " * 1000, path="voice/f1.ogg")
        request = AiohttpRequest()
        async with Bot(
            tg.token, base_url=tg.base_url, base_file_url=tg.base_file_url, request=request
        ) as bot:
            await bot.send_document(42, InputFile(b"report body", filename="r.txt"), caption="c")
            file = await bot.get_file("f1")
            assert bytes(await file.download_as_bytearray()) == b"voice bytes " * 1000
    upload = tg.calls("sendDocument")[0].params
    assert upload["caption"] == "c"
    assert (upload["document"].filename, upload["document"].data) == ("r.txt", b"report body")


async def test_the_proxy_comes_from_the_environment_read_once(
    server: RawServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    request = AiohttpRequest()
    monkeypatch.delenv("HTTP_PROXY")  # read when the request was made, not per call
    async with request:
        assert await request.post("http://api.telegram.test/bot1:x/getMe") == ME
    assert server.seen[-1].target == "http://api.telegram.test/bot1:x/getMe"  # via the proxy

    monkeypatch.setenv("HTTP_PROXY", server.url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with AiohttpRequest() as direct:
        assert await direct.post(server.api("getMe")) == ME
    assert server.seen[-1].target == "/bot123:abc/getMe"  # NO_PROXY: straight to the host


async def test_tls_uses_the_system_store_and_ssl_cert_file_and_checks_the_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path, "127.0.0.1")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    async with RawServer(bot_answer, tls=tls) as raw:
        async with AiohttpRequest() as untrusting:
            with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.post(raw.api("getMe"))
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        async with Bot(TOKEN, base_url=f"{raw.url}/bot", request=AiohttpRequest()) as bot:
            assert await bot.send_chat_action(42, "typing") is True
        assert len(raw.seen) == 2 and raw.seen[0].conn == raw.seen[1].conn

    other, other_key = self_signed(tmp_path / "other", "perch.test")  # trusted, wrong name
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(other, other_key)
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    async with RawServer(bot_answer, tls=tls) as raw, AiohttpRequest() as request:
        with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED") as caught:
            await request.post(raw.api("getMe"))
        assert "mismatch" in str(caught.value)
        assert raw.seen == []


def _form(**params: str) -> RequestData:
    return RequestData([RequestParameter.from_input(k, v) for k, v in params.items()])
