"""python-telegram-bot's HTTP requests over one `aiohttp.ClientSession` per bot.

`AiohttpRequest` is PTB's `BaseRequest` on aiohttp: one keep-alive pool for every Bot API
call, the long poll, multipart uploads and file downloads; Happy Eyeballs on each new
connection (an IPv6 path that drops packets costs 0.25 s, not the connect timeout); TLS
with the system trust store (`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured); a proxy from
`HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` (`NO_PROXY` honoured), read once when the request
is made. The daemon gives one instance to both of PTB's slots (calls and `getUpdates`).

PTB's four timeouts keep their meaning: `connect_timeout` bounds resolving, connecting and
the TLS handshake; `read_timeout` each wait for bytes of the answer (PTB adds the long
poll's own timeout for `getUpdates`); `pool_timeout` the wait for one of
`connection_pool_size` slots (past it, `TimedOut` and nothing sent). aiohttp has no write
timeout: `media_write_timeout` (the larger of the two) becomes each connection's
TCP_USER_TIMEOUT, so data the server stops acknowledging for that long drops the connection
(a stalled upload fails instead of hanging). Failures are PTB's own errors (`TimedOut`,
`NetworkError`); HTTP answers go back to PTB, which raises `RetryAfter`, `BadRequest`,
`Forbidden` ... from them as for its own httpx request.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

HAPPY_EYEBALLS_DELAY = 0.25  # RFC 8305's "connection attempt delay"
POOL_TIMEOUT_TEXT = (
    "Pool timeout: all connections in the connection pool are occupied. "
    "Request was *not* sent to Telegram."
)
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
_DEFAULT = type(BaseRequest.DEFAULT_NONE)  # PTB's "not given" marker class
NO_TYPE = ("Content-Type",)


class AiohttpRequest(BaseRequest):
    """See the module docstring; the arguments are `HTTPXRequest`'s, with its defaults."""

    def __init__(
        self,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        if connection_pool_size < 1:
            raise ValueError("connection_pool_size must be at least 1")
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._write_timeout = max(write_timeout or 0.0, media_write_timeout or 0.0) or None
        self._slots = asyncio.Semaphore(connection_pool_size)
        self._proxies = env_proxies()
        self._proxy_for: dict[str, str | None] = {}
        self._ssl: ssl.SSLContext | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is not None and not self._session.closed:
            return
        if self._ssl is None:
            self._ssl = ssl.create_default_context()  # the system's store, SSL_CERT_FILE
        connector = aiohttp.TCPConnector(
            limit=0,  # the slots bound it, with PTB's pool timeout
            ssl=self._ssl,
            happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
            socket_factory=write_timed_socket(self._write_timeout),
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # the Bot API sets none
            headers={"User-Agent": self.USER_AGENT},
            timeout=aiohttp.ClientTimeout(total=None),
        )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

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
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This AiohttpRequest is not initialized!")
        if isinstance(read_timeout, _DEFAULT):
            read_timeout = self._read_timeout
        if isinstance(connect_timeout, _DEFAULT):
            connect_timeout = self._connect_timeout
        if isinstance(pool_timeout, _DEFAULT):
            pool_timeout = self._pool_timeout
        timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout, sock_read=read_timeout)
        await self._take_slot(pool_timeout)
        try:
            async with session.request(
                method,
                url,
                timeout=timeout,
                proxy=self._proxy(url),
                allow_redirects=False,
                **_body(request_data),
            ) as response:
                return response.status, await response.read()
        except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
            raise TimedOut(f"Timed out: {_describe(exc, url)}") from exc
        except OSError as exc:  # aiohttp's connection errors are OSErrors too; TLS errors
            if exc.errno == errno.ETIMEDOUT:  # TCP_USER_TIMEOUT: the write timed out
                raise TimedOut(f"Timed out: {_describe(exc, url)}") from exc
            raise NetworkError(f"aiohttp.{_describe(exc, url)}") from exc
        except aiohttp.ClientError as exc:  # an answer that is not HTTP, a bad payload
            raise NetworkError(f"aiohttp.{_describe(exc, url)}") from exc
        finally:
            self._slots.release()

    async def _take_slot(self, pool_timeout: float | None) -> None:
        if not self._slots.locked():
            await self._slots.acquire()
            return
        try:
            async with asyncio.timeout(pool_timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise TimedOut(POOL_TIMEOUT_TEXT) from None

    def _proxy(self, url: str) -> str | None:
        end = url.find("/", url.find("//") + 2)
        origin = url if end < 0 else url[:end]  # scheme://host:port, cheaply
        if origin not in self._proxy_for:
            parts = urlsplit(url)
            self._proxy_for[origin] = proxy_for(self._proxies, parts.scheme, parts.hostname or "")
        return self._proxy_for[origin]


def _body(request_data: RequestData | None) -> dict[str, Any]:
    """aiohttp's arguments for PTB's parameters: a form of JSON-encoded values (as PTB's httpx
    request sends them), multipart when there are files."""
    params = request_data.json_parameters if request_data is not None else {}
    if request_data is None or not request_data.contains_files:
        if not params:  # no body, and no Content-Type either (aiohttp would add one)
            return {"skip_auto_headers": NO_TYPE}
        return {"data": urlencode(params).encode(), "headers": FORM}
    form = aiohttp.FormData()
    for name, value in params.items():
        form.add_field(name, value)
    for name, (filename, content, mime) in request_data.multipart_data.items():
        form.add_field(name, content, filename=filename, content_type=mime)
    return {"data": form}


def env_proxies() -> dict[str, str]:
    """The proxy variables (`https`, `http`, `all`, `no`), read once."""
    return {k: v for k, v in urllib.request.getproxies_environment().items() if v}


def proxy_for(proxies: dict[str, str], scheme: str, host: str) -> str | None:
    """The proxy URL for `scheme://host` under `proxies`, or None (direct, or `NO_PROXY`)."""
    chosen = proxies.get(scheme) or proxies.get("all")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # not in typeshed
    if not chosen or bypass(host, proxies):
        return None
    if "://" not in chosen:
        chosen = f"http://{chosen}"
    if urlsplit(chosen).scheme not in ("http", "https"):
        raise NetworkError(f"unsupported proxy {urlsplit(chosen).scheme}:// (http or https)")
    return chosen


def write_timed_socket(seconds: float | None) -> Callable[[Any], socket.socket]:
    """aiohttp's socket factory: TCP sockets that drop the connection once sent data has gone
    unacknowledged for `seconds` (Linux's TCP_USER_TIMEOUT; elsewhere a plain socket)."""
    option = getattr(socket, "TCP_USER_TIMEOUT", None)

    def make(addr_info: tuple[Any, ...]) -> socket.socket:
        family, kind, proto, _, _ = addr_info
        sock = socket.socket(family=family, type=kind, proto=proto)
        if seconds and option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, int(seconds * 1000))
        return sock

    return make


def _describe(exc: BaseException, url: str) -> str:
    """`ClassName: what happened`, with the URL (it holds the bot token) cut to its origin."""
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"{type(exc).__name__}: {exc.message}"
    if isinstance(exc, aiohttp.InvalidURL):
        return f"{type(exc).__name__}: invalid URL"
    parts = urlsplit(url)
    text = str(exc)
    for path in {parts.path, quote(parts.path)} - {""}:
        text = text.replace(path, "")
    return f"{type(exc).__name__}: {text}"
