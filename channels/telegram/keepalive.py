"""The Bot API's plain calls over `http11`'s keep-alive client, for python-telegram-bot.

PTB sends every Bot API call through httpx. Measured here, one call cost about 1 ms of CPU
in httpx, httpcore, h11 and anyio, as much as all of Perch's own work in a turn, and a turn
makes two or three of them: typing, the reply, and a poll (bench/README.md, issue 19).
`KeepAliveRequest` is PTB's request class with those calls sent through `http11.Pool`
instead. TLS uses httpx's trust store (`SSL_CERT_FILE` works as it does for httpx). It
honours PTB's timeouts and raises PTB's errors (`TimedOut`, `NetworkError`).

httpx still takes what this client does not: uploads (multipart), downloads (GET), and every
call when a proxy is configured, an HTTP(S)_PROXY / ALL_PROXY variable covers the host, or
`PERCH_HTTP11=0` is set.
"""

from __future__ import annotations

import functools
import inspect
import zlib
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from http11.connection import BadAnswer, Timeout, encode_request
from http11.pool import Origin, Pool, Timeouts, proxied, switched_off

MAX_BODY = 64 * 1024 * 1024  # a Bot API answer is a few KB; getUpdates at most ~100 updates
_DEFAULT = type(BaseRequest.DEFAULT_NONE)  # PTB's "not given" marker class
PTB_DEFAULTS: dict[str, Any] = {
    name: param.default
    for name, param in inspect.signature(HTTPXRequest.__init__).parameters.items()
    if param.default is not inspect.Parameter.empty
}


@functools.lru_cache(maxsize=512)
def target(url: str) -> tuple[Origin, str, str]:
    """(origin, the Host header, the request line's path) of an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("not an http(s) URL")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Origin(parts.scheme, parts.hostname, port), parts.netloc.rpartition("@")[2], path


def decoded(body: bytes, coding: bytes | None) -> bytes:
    """The body without its Content-Encoding (none was asked for; gzip is undone anyway)."""
    coding = (coding or b"").strip().lower()
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


class KeepAliveRequest(HTTPXRequest):
    """PTB's HTTPXRequest with the plain Bot API calls (POST, no files, no proxy) sent
    through `http11.Pool`; everything else goes to httpx as before."""

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
            not switched_off()
            and given["http_version"] == "1.1"
            and given["proxy"] is None
            and not given["socket_options"]
            and not given["httpx_kwargs"]
        )
        self._pool = Pool(int(given["connection_pool_size"]), httpx.create_ssl_context)

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
            origin, _, _ = target(url)
        except ValueError:
            return False
        return not proxied(origin.scheme, origin.host)

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
        origin, host, path = target(url)
        params = request_data.json_parameters if request_data is not None else None
        headers = [
            (b"Host", host.encode("latin-1")),
            (b"User-Agent", self.USER_AGENT.encode("latin-1")),
            (b"Accept", b"*/*"),
        ]
        body = b""
        if params:  # as httpx sends PTB's `data=`: a form of JSON-encoded values
            body = urlencode(params).encode()
            headers.append((b"Content-Type", b"application/x-www-form-urlencoded"))
        request = encode_request(b"POST", path.encode("latin-1"), headers, body)
        try:
            return await self._exchange(origin, request, timeouts)
        except Timeout as exc:
            if exc.phase == "pool":
                raise TimedOut(
                    "Pool timeout: all connections in the connection pool are occupied. "
                    "Request was *not* sent to Telegram."
                ) from None
            raise TimedOut from exc
        except (OSError, BadAnswer) as exc:  # ssl.SSLError is an OSError
            raise NetworkError(f"{type(exc).__name__}: {exc}") from exc

    async def _exchange(
        self, origin: Origin, request: bytes, timeouts: Timeouts
    ) -> tuple[int, bytes]:
        conn = await self._pool.checkout(origin, timeouts)
        try:
            await conn.send(request, timeouts.write)
            answer = await conn.head(timeouts.read)
            body = await conn.read_body(answer, timeouts.read, limit=MAX_BODY)
        finally:
            self._pool.checkin(origin, conn)  # kept only if the answer was read whole
        return answer.status, decoded(body, answer.get(b"content-encoding"))
