"""The Bot API's plain calls over a lean keep-alive HTTP/1.1 client, for python-telegram-bot.

PTB sends every Bot API call through httpx. Measured here, one call cost about 1.5 ms of CPU
in httpx, httpcore, h11 and anyio, as much as all of Perch's own work in a turn, and a turn
makes two or three of them: typing, the reply, and a poll (bench/README.md, issue 19).
`KeepAliveRequest` is PTB's request class with those calls sent over asyncio's own transports
instead. It reuses connections, one request on a connection at a time, newest first. A
connection idle 5 s is dropped (httpx's expiry), and so is one the server has closed or
written to unasked. TLS uses httpx's trust store. It honours PTB's timeouts and raises PTB's
errors (`TimedOut`, `NetworkError`).

httpx still takes what this client does not: uploads (multipart), downloads (GET), and every
call when a proxy is configured or an HTTP(S)_PROXY / ALL_PROXY variable covers the host.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import ssl
import time
import urllib.request
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept (httpx's default)
MAX_HEAD = 64 * 1024  # a response's status line and headers
MAX_BODY = 64 * 1024 * 1024  # a Bot API answer is a few KB; getUpdates at most ~100 updates
_DEFAULT = type(BaseRequest.DEFAULT_NONE)  # PTB's "not given" marker class
PTB_DEFAULTS: dict[str, Any] = {
    name: param.default
    for name, param in inspect.signature(HTTPXRequest.__init__).parameters.items()
    if param.default is not inspect.Parameter.empty
}


class BadAnswer(Exception):
    """The server's answer could not be read: malformed, too large, or cut off."""


class PoolTimeout(TimeoutError):
    """Every connection stayed busy for the pool timeout; the request was not sent."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float | None
    write: float | None
    read: float | None
    pool: float | None


@dataclass(frozen=True, slots=True)
class Target:
    """Where a URL's request goes: the connection's origin and the request line's path."""

    scheme: str
    host: str
    port: int
    authority: str  # the Host header
    path: str


@functools.lru_cache(maxsize=512)
def target(url: str) -> Target:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    authority = parts.netloc.rpartition("@")[2]
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname, port, authority, path)


@functools.lru_cache(maxsize=64)
def proxied(scheme: str, host: str) -> bool:
    """Whether httpx would send a request for `scheme://host` through an environment proxy."""
    proxies = urllib.request.getproxies_environment()
    if scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(host)  # NO_PROXY / no_proxy


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: what the server sent waits in a buffer until it is parsed."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self._buf = bytearray()
        self._closed = False
        self._lost: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        self._wake()

    def eof_received(self) -> bool:
        self._closed = True
        self._wake()
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._lost = exc
        self._wake()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _event(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    # our side
    def reusable(self, now: float) -> bool:
        """Idle, open, silent since its last answer and not yet expired."""
        transport = self.transport
        return (
            not self._closed
            and not self._buf
            and transport is not None
            and not transport.is_closing()
            and now - self.idle_since < KEEPALIVE_EXPIRY
        )

    def close(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.close()

    async def send(self, data: bytes) -> None:
        if self._closed or self.transport is None:
            raise ConnectionError("the connection is closed")
        self.transport.write(data)
        while self._paused and not self._closed:
            await self._event()
        if self._closed:
            raise ConnectionError(self._why_closed())

    async def answer(self) -> tuple[int, bool, bytes]:
        """Read one response: (status, whether the connection may carry another, body)."""
        while True:
            status, version, headers = await self._head()
            if not 100 <= status < 200:
                break  # 1xx (100 Continue, 103 Early Hints) come before the answer
        encoding = headers.get(b"transfer-encoding", b"").lower()
        keep = version == b"HTTP/1.1" and b"close" not in _tokens(headers.get(b"connection"))
        if status in (204, 304):
            body = b""
        elif b"chunked" in encoding:
            body = await self._chunked()
        elif (length := headers.get(b"content-length")) is not None:
            if not length.isdigit() or int(length) > MAX_BODY:
                raise BadAnswer(f"bad Content-Length {length[:20]!r}")
            body = await self._exactly(int(length))
        else:
            body, keep = await self._until_closed(), False
        if self._buf:
            keep = False  # more than the answer came: the next reader could not trust it
        return status, keep, _decoded(body, headers.get(b"content-encoding", b""))

    def _why_closed(self) -> str:
        cause = f": {self._lost}" if self._lost else ""
        return f"the server closed the connection before its answer was complete{cause}"

    async def _more(self) -> None:
        if self._closed:
            raise BadAnswer(self._why_closed())
        await self._event()

    async def _head(self) -> tuple[int, bytes, dict[bytes, bytes]]:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise BadAnswer("the response's headers are too large")
            await self._more()
        lines = bytes(self._buf[:end]).split(b"\r\n")
        del self._buf[: end + 4]
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise BadAnswer(f"not an HTTP/1.x answer: {lines[0][:40]!r}")
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name.strip():
                raise BadAnswer(f"malformed header line {line[:40]!r}")
            headers[name.strip().lower()] = value.strip()
        return int(code), version, headers

    async def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            await self._more()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    async def _line(self) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise BadAnswer("a chunk line is too long")
            await self._more()
        line = bytes(self._buf[:end])
        del self._buf[: end + 2]
        return line

    async def _chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_field = (await self._line()).split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise BadAnswer(f"bad chunk size {size_field[:20]!r}") from None
            if size < 0 or total + size > MAX_BODY:
                raise BadAnswer("the answer is too large")
            if size == 0:
                break
            total += size
            parts.append(await self._exactly(size))
            if await self._line():
                raise BadAnswer("a chunk is longer than its size")
        while await self._line():
            pass  # trailer fields
        return b"".join(parts)

    async def _until_closed(self) -> bytes:
        while not self._closed:
            if len(self._buf) > MAX_BODY:
                raise BadAnswer("the answer is too large")
            await self._event()
        if self._lost is not None:
            raise BadAnswer(self._why_closed())
        data = bytes(self._buf)
        self._buf.clear()
        return data


def _tokens(value: bytes | None) -> list[bytes]:
    return [token.strip().lower() for token in (value or b"").split(b",")]


def _decoded(body: bytes, coding: bytes) -> bytes:
    """The body without its Content-Encoding (none was asked for; gzip is undone anyway)."""
    coding = coding.strip().lower()
    if coding in (b"", b"identity"):
        return body
    if coding not in (b"gzip", b"x-gzip", b"deflate"):
        raise BadAnswer(f"unsupported Content-Encoding {coding[:20]!r}")
    inflater = zlib.decompressobj(47)  # gzip or zlib header, detected
    try:
        data = inflater.decompress(body, MAX_BODY)
    except zlib.error as exc:
        raise BadAnswer(f"a {coding.decode()} body that does not decode: {exc}") from None
    if inflater.unconsumed_tail:
        raise BadAnswer("the answer is too large")
    return data


class KeepAlivePool:
    """Connections per origin, at most `size` requests at once (httpx's `max_connections`)."""

    def __init__(self, size: int) -> None:
        self._slots = asyncio.Semaphore(size)
        self._idle: dict[tuple[str, str, int], list[Connection]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def post(
        self, url: str, body: bytes, content_type: str | None, agent: str, timeouts: Timeouts
    ) -> tuple[int, bytes]:
        where = target(url)
        head = [
            f"POST {where.path} HTTP/1.1",
            f"Host: {where.authority}",
            f"User-Agent: {agent}",
            "Accept: */*",
            f"Content-Length: {len(body)}",
        ]
        if content_type:
            head.append(f"Content-Type: {content_type}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        if self._slots.locked():
            try:
                async with asyncio.timeout(timeouts.pool):
                    await self._slots.acquire()
            except TimeoutError:
                raise PoolTimeout from None
        else:
            await self._slots.acquire()  # free: returns at once
        try:
            return await self._exchange(where, request, timeouts)
        finally:
            self._slots.release()

    async def _exchange(
        self, where: Target, request: bytes, timeouts: Timeouts
    ) -> tuple[int, bytes]:
        origin = (where.scheme, where.host, where.port)
        conn = self._take(origin) or await self._connect(where, timeouts.connect)
        keep = False
        try:
            async with asyncio.timeout(timeouts.write):
                await conn.send(request)
            async with asyncio.timeout(timeouts.read):
                status, keep, body = await conn.answer()
            return status, body
        finally:
            if keep:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(origin, []).append(conn)
            else:  # failed, cancelled, timed out or closed by the server: never reused
                conn.close()

    def _take(self, origin: tuple[str, str, int]) -> Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the newest: the likeliest to be open still
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    async def _connect(self, where: Target, timeout: float | None) -> Connection:
        tls = None
        if where.scheme == "https":
            if self._ssl is None:
                self._ssl = httpx.create_ssl_context()  # httpx's trust store and settings
            tls = self._ssl
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            _, conn = await loop.create_connection(
                Connection,
                where.host,
                where.port,
                ssl=tls,
                server_hostname=where.host if tls else None,
            )
        return conn

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


class KeepAliveRequest(HTTPXRequest):
    """PTB's HTTPXRequest with the plain Bot API calls (POST, no files, no proxy) sent
    through `KeepAlivePool`; everything else goes to httpx as before."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        given = {**PTB_DEFAULTS, **kwargs}
        self._timeouts = Timeouts(
            connect=given["connect_timeout"],
            write=given["write_timeout"],
            read=given["read_timeout"],
            pool=given["pool_timeout"],
        )
        self._lean = (
            given["http_version"] == "1.1"
            and given["proxy"] is None
            and not given["socket_options"]
            and not given["httpx_kwargs"]
        )
        self._pool = KeepAlivePool(int(given["connection_pool_size"]))

    async def shutdown(self) -> None:
        self._pool.close()
        await super().shutdown()

    def takes(self, url: str, method: str, request_data: RequestData | None) -> bool:
        """Whether this call goes through the lean client (else httpx)."""
        if not self._lean or method != "POST":
            return False
        if request_data is not None and request_data.contains_files:
            return False
        try:
            where = target(url)
        except ValueError:
            return False
        return not proxied(where.scheme, where.host)

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if not self.takes(url, method, request_data):
            return await super().do_request(
                url,
                method,
                request_data,
                read_timeout=read_timeout,
                write_timeout=write_timeout,
                connect_timeout=connect_timeout,
                pool_timeout=pool_timeout,
            )
        ours = self._timeouts
        timeouts = Timeouts(
            connect=ours.connect if isinstance(connect_timeout, _DEFAULT) else connect_timeout,
            write=ours.write if isinstance(write_timeout, _DEFAULT) else write_timeout,
            read=ours.read if isinstance(read_timeout, _DEFAULT) else read_timeout,
            pool=ours.pool if isinstance(pool_timeout, _DEFAULT) else pool_timeout,
        )
        params = request_data.json_parameters if request_data is not None else None
        if params:  # as httpx sends PTB's `data=`: a form of JSON-encoded values
            body, content_type = urlencode(params).encode(), "application/x-www-form-urlencoded"
        else:
            body, content_type = b"", None
        try:
            return await self._pool.post(url, body, content_type, self.USER_AGENT, timeouts)
        except PoolTimeout:
            raise TimedOut(
                "Pool timeout: all connections in the connection pool are occupied. "
                "Request was *not* sent to Telegram."
            ) from None
        except TimeoutError as exc:
            raise TimedOut from exc
        except (OSError, BadAnswer) as exc:  # ssl.SSLError is an OSError
            raise NetworkError(f"{type(exc).__name__}: {exc}") from exc
