"""The lean keep-alive client under PTB's Bot API calls (`channels/telegram/keepalive.py`).

A raw HTTP/1.1 server on 127.0.0.1 answers each request with bytes the test chooses, so the
client meets what real servers do: chunked and gzipped answers, `Connection: close`, idle
connections closed, answers late or malformed, TLS. The real `telegram.Bot` drives it, and
the same calls through PTB's plain httpx client are the reference for what goes on the wire.
"""

from __future__ import annotations

import asyncio
import datetime
import gzip
import ipaddress
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from telegram import Bot, InputFile
from telegram.error import NetworkError, TimedOut
from telegram.request import HTTPXRequest, RequestData
from telegram.request._requestparameter import RequestParameter

from channels.telegram.keepalive import KeepAliveRequest
from http11 import connection, pool
from tests.fakes.raw_http import Answer, RawServer, Seen, reply
from tests.waiting import eventually

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


def lean(**kwargs: object) -> KeepAliveRequest:
    return KeepAliveRequest(**{"connection_pool_size": 4, **kwargs})  # type: ignore[arg-type]


async def test_calls_go_on_the_wire_as_httpx_sends_them_and_share_a_connection(
    server: RawServer,
) -> None:
    text = "héllo & <b>bye</b> = 100%"
    for request in (HTTPXRequest(), lean()):
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
    assert "accept-encoding" not in ours[0].headers  # ours: nothing to decode
    assert {s.conn for s in ours} == {ours[0].conn}  # getMe and the three calls: one connection


async def test_chunked_and_gzipped_answers_are_read_whole() -> None:
    def script(seen: Seen) -> Answer:
        body = json.dumps({"ok": True, "result": seen.form()["n"][0] * 3000}).encode()
        if seen.form()["n"][0] == "1":
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
        head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(packed)}\r\n\r\n"
        return Answer([head.encode(), packed])

    async with RawServer(script) as raw:
        request = lean()
        await request.initialize()
        try:
            for n in ("1", "2", "1"):
                data = await request.post(raw.api("x"), _form(n=n))
                assert data == n * 3000
        finally:
            await request.shutdown()
        assert raw.connections == 1


async def test_a_connection_closed_by_the_server_is_never_reused() -> None:
    def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "close-header":
            return Answer([reply({"ok": True, "result": 1}, extra="Connection: close\r\n")])
        if seen.form()["n"][0] == "until-eof":  # no length: the body ends with the connection
            return Answer([b'HTTP/1.1 200 OK\r\n\r\n{"ok": true, "result": 2}'], close=True)
        return Answer([reply({"ok": True, "result": 3})], close=True)  # then closed idle

    async with RawServer(script) as raw:
        request = lean()
        await request.initialize()
        try:
            assert await request.post(raw.api("x"), _form(n="close-header")) == 1
            assert await request.post(raw.api("x"), _form(n="until-eof")) == 2
            assert await request.post(raw.api("x"), _form(n="idle")) == 3
            # The server closed that one after answering: once the client has seen it, the
            # next call opens a fresh connection instead of failing on the dead one.
            await eventually(lambda: not _reusable(request))
            assert await request.post(raw.api("x"), _form(n="idle")) == 3
        finally:
            await request.shutdown()
        assert [s.conn for s in raw.seen] == [1, 2, 3, 4]


async def test_a_late_answer_times_out_and_never_answers_the_next_call() -> None:
    release = asyncio.Event()

    async def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "slow":
            await release.wait()
            return Answer([reply({"ok": True, "result": "late"})])
        return Answer([reply({"ok": True, "result": "fresh"})])

    async with RawServer(script) as raw:
        request = lean(read_timeout=0.2)
        await request.initialize()
        try:
            with pytest.raises(TimedOut):
                await request.post(raw.api("x"), _form(n="slow"))
            release.set()
            assert await request.post(raw.api("x"), _form(n="next")) == "fresh"
            assert raw.connections == 2
        finally:
            await request.shutdown()


async def test_a_cancelled_call_leaves_no_half_read_connection_behind() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "hang":
            started.set()
            await release.wait()
            return Answer([reply({"ok": True, "result": "stale"})])
        return Answer([reply({"ok": True, "result": "mine"})])

    async with RawServer(script) as raw:
        request = lean()
        await request.initialize()
        try:
            call = asyncio.create_task(request.post(raw.api("x"), _form(n="hang")))
            await started.wait()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            release.set()
            assert await request.post(raw.api("x"), _form(n="next")) == "mine"
            assert raw.connections == 2
        finally:
            await request.shutdown()


async def test_a_full_pool_times_out_without_sending() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def script(seen: Seen) -> Answer:
        started.set()
        await release.wait()
        return Answer([reply({"ok": True, "result": True})])

    async with RawServer(script) as raw:
        request = lean(connection_pool_size=1, pool_timeout=0.1)
        await request.initialize()
        try:
            first = asyncio.create_task(request.post(raw.api("x"), _form(n="1")))
            await started.wait()
            with pytest.raises(TimedOut, match="Pool timeout"):
                await request.post(raw.api("x"), _form(n="2"))
            release.set()
            assert await first is True
            assert len(raw.seen) == 1  # the second was never sent
        finally:
            await request.shutdown()


@pytest.mark.parametrize(
    "garbage",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 2OO OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (connection.MAX_HEAD + 10),
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short",
    ],
)
async def test_a_malformed_answer_is_a_network_error_and_the_next_call_works(
    garbage: bytes,
) -> None:
    def script(seen: Seen) -> Answer:
        if seen.form()["n"][0] == "bad":
            return Answer([garbage], close=True)
        return Answer([reply({"ok": True, "result": "ok"})])

    async with RawServer(script) as raw:
        request = lean()
        await request.initialize()
        try:
            with pytest.raises(NetworkError) as caught:
                await request.post(raw.api("x"), _form(n="bad"))
            assert TOKEN not in str(caught.value)
            assert await request.post(raw.api("x"), _form(n="good")) == "ok"
        finally:
            await request.shutdown()


async def test_uploads_and_proxied_hosts_go_through_httpx(
    server: RawServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    async with Bot(TOKEN, base_url=f"{server.url}/bot", request=lean()) as bot:
        await bot.send_document(42, InputFile(b"report", filename="r.txt"))
    upload = server.seen[-1]
    assert upload.headers["content-type"].startswith("multipart/form-data")
    assert "accept-encoding" in upload.headers  # httpx's request, not ours

    # An HTTP_PROXY that covers the host: every call goes to the proxy, by httpx.
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    pool.proxied.cache_clear()
    try:
        request = lean()
        await request.initialize()
        try:
            assert await request.post("http://127.0.0.1:1/bot1:x/getMe") == ME
        finally:
            await request.shutdown()
    finally:
        pool.proxied.cache_clear()
    assert server.seen[-1].target == "http://127.0.0.1:1/bot1:x/getMe"  # absolute: via proxy
    assert not lean(proxy=server.url).takes(server.api("getMe"), "POST", None)


async def test_tls_is_verified_with_httpx_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    async with RawServer(bot_answer, tls=tls) as raw:
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        untrusting = lean()
        await untrusting.initialize()
        try:
            with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED"):
                await untrusting.post(raw.api("getMe"))
        finally:
            await untrusting.shutdown()
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # as httpx reads it
        async with Bot(TOKEN, base_url=f"{raw.url}/bot", request=lean()) as bot:
            assert await bot.send_chat_action(42, "typing") is True
        assert len(raw.seen) == 2 and raw.seen[0].conn == raw.seen[1].conn


def _form(**params: str) -> RequestData:
    return RequestData([RequestParameter.from_input(k, v) for k, v in params.items()])


def _reusable(request: KeepAliveRequest) -> bool:
    now = time.monotonic()
    return any(c.reusable(now) for idle in request._pool._idle.values() for c in idle)


def _self_signed(where: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
