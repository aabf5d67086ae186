"""One HTTP/1.1 client connection: a request out, its answer read as it arrives.

`Connection` is an asyncio protocol. What the server sends waits in a buffer until it is
parsed: the head (status line and headers, 1xx answers skipped) and then the body, framed by
Content-Length, chunked transfer coding, or the connection's end. The body comes out in
pieces as they arrive, so a streamed answer (server-sent events) is never held back. Each
wait for more bytes has its own timeout, as httpcore's read timeout works. A connection may
carry another request only if its answer was read to the end, the server did not ask to
close it, and nothing more arrived after it. `encode_request` writes a request the one way
both adapters send them: whole, with its Content-Length.
"""

from __future__ import annotations

import asyncio
import select
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept (httpx's default)
MAX_HEAD = 64 * 1024  # a response's status line and headers, or one chunk-size line
READ_HIGH = 256 * 1024  # buffered and not yet read: stop reading the socket (backpressure)
READ_LOW = 64 * 1024  # ... and read again once the reader took it down to this


class BadAnswer(Exception):
    """The server's answer could not be read: malformed, or cut off by the connection."""


class Timeout(TimeoutError):
    """A wait ran out; `phase` says which one: pool, connect, write or read."""

    def __init__(self, phase: str) -> None:
        super().__init__(f"{phase} timeout")
        self.phase = phase


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    reason: bytes
    version: bytes
    headers: list[tuple[bytes, bytes]]  # names lowercased, in the order sent

    def get(self, name: bytes) -> bytes | None:
        """The last value of header `name` (lowercase)."""
        for key, value in reversed(self.headers):
            if key == name:
                return value
        return None

    @property
    def keep_alive(self) -> bool:
        tokens = [t.strip().lower() for t in (self.get(b"connection") or b"").split(b",")]
        return self.version == b"HTTP/1.1" and b"close" not in tokens


def encode_request(
    method: bytes, target: bytes, headers: Iterable[tuple[bytes, bytes]], body: bytes
) -> bytes:
    """A whole HTTP/1.1 request. `headers` must not carry Content-Length or
    Transfer-Encoding: the body is sent whole, with its length (also 0 for a POST)."""
    lines = [method + b" " + target + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in headers]
    if body or method in (b"POST", b"PUT", b"PATCH"):
        lines.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _expire(waiter: asyncio.Future[None], phase: str) -> None:
    if not waiter.done():
        waiter.set_exception(Timeout(phase))


class Connection(asyncio.Protocol):
    """One HTTP/1.1 connection (see the module docstring)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.keep = False  # set once an answer was read whole and the connection may go on
        self._buf = bytearray()
        self._closed = False
        self._lost: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._reading_paused = False

    # -- asyncio's callbacks ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) > READ_HIGH and not self._reading_paused and self.transport:
            self._reading_paused = True  # a server faster than its reader waits in the kernel
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._closed = True
        self._wake()
        return False  # the transport closes itself

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

    async def _wait(self, timeout: float | None, phase: str) -> None:
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _expire, waiter, phase) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    # -- the pool's side -------------------------------------------------------------------

    @property
    def open(self) -> bool:
        """Open, and nothing buffered since its last answer (no system call)."""
        transport = self.transport
        return not (self._closed or self._buf or transport is None or transport.is_closing())

    def reusable(self, now: float | None = None) -> bool:
        """Open, idle for less than the expiry, and nothing (not even the server's close)
        waiting in the socket that the event loop has not read yet: checked at reuse."""
        now = time.monotonic() if now is None else now
        if not self.open or now - self.idle_since >= KEEPALIVE_EXPIRY:
            return False
        assert self.transport is not None
        sock = self.transport.get_extra_info("socket")
        if sock is None:
            return True
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return not poller.poll(0)

    def close(self) -> None:
        self._closed = True
        if self.transport is not None:
            self.transport.close()

    # -- one exchange ----------------------------------------------------------------------

    async def send(self, data: bytes, timeout: float | None) -> None:
        """Write a whole request; raises ConnectionError if the connection is gone."""
        self.keep = False
        if self._closed or self.transport is None:
            raise ConnectionError("the connection is closed")
        self.transport.write(data)
        while self._paused and not self._closed:
            await self._wait(timeout, "write")
        if self._closed:
            raise ConnectionError(self._why_closed())

    async def head(self, timeout: float | None) -> Head:
        """The answer's status line and headers (informational 1xx answers skipped)."""
        while True:
            head = await self._head(timeout)
            if not 100 <= head.status < 200:
                return head

    async def body(
        self, head: Head, timeout: float | None, *, bodiless: bool = False
    ) -> AsyncIterator[bytes]:
        """The answer's body in pieces as they arrive, de-chunked but not decoded.
        `bodiless`: the request was HEAD. Sets `keep` once the body was read whole."""
        encoding = (head.get(b"transfer-encoding") or b"").lower()
        length = head.get(b"content-length")
        keep = head.keep_alive
        if bodiless or head.status in (204, 304):
            pass
        elif b"chunked" in encoding:
            async for piece in self._chunked(timeout):
                yield piece
        elif length is not None:
            if not length.isdigit():
                raise BadAnswer(f"bad Content-Length {length[:20]!r}")
            async for piece in self._counted(int(length), timeout):
                yield piece
        else:
            keep = False
            async for piece in self._until_closed(timeout):
                yield piece
        self.keep = keep and not self._buf and not self._closed

    async def read_body(
        self, head: Head, timeout: float | None, *, limit: int, bodiless: bool = False
    ) -> bytes:
        """The whole body; BadAnswer past `limit` bytes."""
        parts: list[bytes] = []
        size = 0
        async for piece in self.body(head, timeout, bodiless=bodiless):
            size += len(piece)
            if size > limit:
                raise BadAnswer("the answer is too large")
            parts.append(piece)
        return b"".join(parts)

    # -- parsing ---------------------------------------------------------------------------

    def _why_closed(self) -> str:
        cause = f": {self._lost}" if self._lost else ""
        return f"the server closed the connection before its answer was complete{cause}"

    async def _more(self, timeout: float | None) -> None:
        if self._closed:
            raise BadAnswer(self._why_closed())
        await self._wait(timeout, "read")

    async def _head(self, timeout: float | None) -> Head:
        while (end := self._buf.find(b"\r\n\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise BadAnswer("the answer's headers are too large")
            await self._more(timeout)
        lines = bytes(self._buf[:end]).split(b"\r\n")
        del self._buf[: end + 4]
        version, _, rest = lines[0].partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise BadAnswer(f"not an HTTP/1.x answer: {lines[0][:40]!r}")
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name.strip():
                raise BadAnswer(f"malformed header line {line[:40]!r}")
            headers.append((name.strip().lower(), value.strip()))
        return Head(int(code), reason, version, headers)

    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        if self._reading_paused and len(self._buf) <= READ_LOW and self.transport:
            self._reading_paused = False
            self.transport.resume_reading()
        return data

    async def _counted(self, n: int, timeout: float | None) -> AsyncIterator[bytes]:
        while n > 0:
            if not self._buf:
                await self._more(timeout)
                continue
            piece = self._take(min(n, len(self._buf)))
            n -= len(piece)
            yield piece

    async def _line(self, timeout: float | None) -> bytes:
        while (end := self._buf.find(b"\r\n")) < 0:
            if len(self._buf) > MAX_HEAD:
                raise BadAnswer("a chunk line is too long")
            await self._more(timeout)
        line = self._take(end)
        del self._buf[:2]
        return line

    async def _chunked(self, timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            field = (await self._line(timeout)).split(b";", 1)[0].strip()
            if not field or not all(c in b"0123456789abcdefABCDEF" for c in field):
                raise BadAnswer(f"bad chunk size {field[:20]!r}")
            size = int(field, 16)
            if size == 0:
                break
            async for piece in self._counted(size, timeout):
                yield piece
            if await self._line(timeout):
                raise BadAnswer("a chunk is longer than its size")
        while await self._line(timeout):
            pass  # trailer fields

    async def _until_closed(self, timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            if self._buf:
                yield self._take(len(self._buf))
            elif self._closed:
                if self._lost is not None:
                    raise BadAnswer(self._why_closed())
                return
            else:
                await self._wait(timeout, "read")
