"""The model SDKs' HTTP transport: their requests over `http11`'s keep-alive client.

Both SDKs (anthropic, openai) send through httpx2, whose lower layers (httpcore2, h11, anyio)
cost about 1 ms of CPU per model call here (bench/README.md, issue 19). `LeanTransport` is
an httpx2 transport: the SDK keeps building requests, retrying, parsing and streaming as
always, and only the bytes on the wire go through `http11.Pool`. The answer's body is handed
on piece by piece as it arrives, so streamed replies (server-sent events) are unchanged.
Timeouts are httpx2's four (the read timeout is per wait for bytes, as in httpcore), and the
errors are httpx2's own (`ConnectError`, `ConnectTimeout`, `ReadTimeout`,
`RemoteProtocolError`, ...), so the SDK and `agents.providers.retry` tell failures apart as
before. TLS uses httpx2's default context (the system trust store).

`lean_http_client(base_url, client_class)` builds the SDK's own default client class around
it, or returns None (the SDK's default client, with httpx2's proxy support) when an
HTTP(S)_PROXY / ALL_PROXY variable covers the host or `PERCH_HTTP11=0` is set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TypeVar

import httpx2

from http11.connection import BadAnswer, Connection, Head, Timeout, encode_request
from http11.pool import ConnectFailed, Origin, Pool, Timeouts, proxied, switched_off

POOL_SIZE = 100  # connections busy at once; the run cap keeps model calls far below it
_SKIPPED = frozenset({b"content-length", b"transfer-encoding"})  # set from the body read

Client = TypeVar("Client", bound=httpx2.AsyncClient)


def lean_http_client(base_url: str, client_class: Callable[..., Client]) -> Client | None:
    """`client_class` (the SDK's default httpx2 client) on `LeanTransport`; None when a
    proxy variable covers `base_url`'s host (then the SDK's own client handles proxies)."""
    url = httpx2.URL(base_url)
    if switched_off() or url.scheme not in ("http", "https") or proxied(url.scheme, url.host):
        return None
    return client_class(transport=LeanTransport())


class LeanTransport(httpx2.AsyncBaseTransport):
    """See the module docstring."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self._pool = Pool(size, httpx2.create_ssl_context)

    async def aclose(self) -> None:
        self._pool.close()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported scheme {url.scheme!r}", request=request)
        origin = Origin(url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        given = request.extensions.get("timeout", {})
        timeouts = Timeouts(
            connect=given.get("connect"),
            write=given.get("write"),
            read=given.get("read"),
            pool=given.get("pool"),
        )
        body = await request.aread()
        headers = [(k, v) for k, v in request.headers.raw if k.lower() not in _SKIPPED]
        data = encode_request(request.method.encode(), url.raw_path, headers, body)
        try:
            conn = await self._pool.checkout(origin, timeouts)
        except Timeout as exc:
            raise _timeout(exc, request) from None
        except ConnectFailed as exc:
            raise httpx2.ConnectError(str(exc), request=request) from exc
        try:
            await conn.send(data, timeouts.write)
            head = await conn.head(timeouts.read)
        except BaseException as exc:
            self._pool.checkin(origin, conn)  # not kept: the exchange did not finish
            if isinstance(exc, Timeout):
                raise _timeout(exc, request) from None
            if isinstance(exc, ConnectionError):
                raise httpx2.WriteError(str(exc), request=request) from exc
            if isinstance(exc, BadAnswer):
                raise httpx2.RemoteProtocolError(str(exc), request=request) from exc
            raise
        stream = AnswerBody(self._pool, origin, conn, head, timeouts.read, request)
        return httpx2.Response(
            head.status,
            headers=head.headers,
            stream=stream,
            extensions={"http_version": head.version, "reason_phrase": head.reason},
        )


class AnswerBody(httpx2.AsyncByteStream):
    """The answer's body as httpx2 reads it; the connection goes back to the pool on close
    (kept only if the body was read to its end)."""

    def __init__(
        self,
        pool: Pool,
        origin: Origin,
        conn: Connection,
        head: Head,
        read_timeout: float | None,
        request: httpx2.Request,
    ) -> None:
        self._pool = pool
        self._origin = origin
        self._conn: Connection | None = conn
        self._head = head
        self._timeout = read_timeout
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        if conn is None:
            return
        bodiless = self._request.method == "HEAD"
        try:
            async for piece in conn.body(self._head, self._timeout, bodiless=bodiless):
                yield piece
        except Timeout as exc:
            raise _timeout(exc, self._request) from None
        except BadAnswer as exc:
            raise httpx2.RemoteProtocolError(str(exc), request=self._request) from exc

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.checkin(self._origin, conn)


def _timeout(exc: Timeout, request: httpx2.Request) -> httpx2.TimeoutException:
    kind = {
        "pool": httpx2.PoolTimeout,
        "connect": httpx2.ConnectTimeout,
        "write": httpx2.WriteTimeout,
    }.get(exc.phase, httpx2.ReadTimeout)
    return kind(str(exc), request=request)
