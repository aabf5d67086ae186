"""Keep-alive connections per origin, at most `size` of them busy at once.

`Pool.checkout(origin, timeouts)` waits for a free place (the pool timeout), then hands out
the newest idle connection to that origin that is still reusable, or opens one (the connect
timeout; TLS with the context the adapter gives, which is its library's own trust store).
`Pool.checkin(conn)` gives the place back and keeps the connection only if its last answer
left it open for another (`Connection.keep`). `proxied(scheme, host)` says whether the environment's
proxy variables cover a host, as httpx reads them, so the adapters leave such calls to httpx;
`switched_off()` reads `PERCH_HTTP11=0`, the operator's way back to httpx for everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import ssl
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from http11.connection import Connection, Timeout

# TCP keepalive as the model SDKs set it: a dead peer under a long answer is noticed.
_KEEPALIVE_OPTIONS = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    *[
        (socket.IPPROTO_TCP, option, value)
        for name, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 60), ("TCP_KEEPCNT", 5))
        if (option := getattr(socket, name, None)) is not None
    ],
]


class ConnectFailed(OSError):
    """No connection could be opened (refused, unreachable, name unknown, TLS refused)."""


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str  # http or https
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float | None
    write: float | None
    read: float | None
    pool: float | None


@functools.lru_cache(maxsize=64)
def proxied(scheme: str, host: str) -> bool:
    """Whether an HTTP(S)_PROXY / ALL_PROXY variable covers `scheme://host` (NO_PROXY
    honoured). Read once per host: the environment does not change under a running daemon."""
    proxies = urllib.request.getproxies_environment()
    if scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(host)


class Pool:
    """See the module docstring."""

    def __init__(self, size: int, tls: Callable[[], ssl.SSLContext]) -> None:
        self._slots = asyncio.Semaphore(max(size, 1))
        self._idle: dict[Origin, list[Connection]] = {}
        self._make_tls = tls
        self._tls: ssl.SSLContext | None = None

    async def checkout(self, origin: Origin, timeouts: Timeouts) -> Connection:
        if self._slots.locked():
            try:
                async with asyncio.timeout(timeouts.pool):
                    await self._slots.acquire()
            except TimeoutError:
                raise Timeout("pool") from None
        else:
            await self._slots.acquire()  # a place is free: returns at once
        try:
            conn = self._take(origin) or await self._connect(origin, timeouts.connect)
        except BaseException:
            self._slots.release()
            raise
        conn.keep = False
        return conn

    def checkin(self, origin: Origin, conn: Connection) -> None:
        """Give the place back; the connection stays open only if it may carry another."""
        self._slots.release()
        if conn.keep and conn.open:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(origin, []).append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    def _take(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the newest: the likeliest to be open still
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin, timeout: float | None) -> Connection:
        tls = None
        if origin.scheme == "https":
            if self._tls is None:
                self._tls = self._make_tls()
            tls = self._tls
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, conn = await loop.create_connection(
                    Connection,
                    origin.host,
                    origin.port,
                    ssl=tls,
                    server_hostname=origin.host if tls else None,
                )
        except TimeoutError:
            raise Timeout("connect") from None
        except OSError as exc:  # refused, unreachable, unknown name, TLS refused
            raise ConnectFailed(f"{type(exc).__name__}: {exc}") from exc
        sock = transport.get_extra_info("socket")
        if sock is not None:
            for level, option, value in _KEEPALIVE_OPTIONS:
                with contextlib.suppress(OSError):  # not every socket takes every option
                    sock.setsockopt(level, option, value)
        return conn


def switched_off() -> bool:
    """`PERCH_HTTP11=0` (or off, false, no) in the environment: every call goes through the
    libraries' own httpx transports, as before this package existed."""
    return os.environ.get("PERCH_HTTP11", "").strip().lower() in ("0", "off", "false", "no")
