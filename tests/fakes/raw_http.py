"""A raw HTTP/1.1 server on 127.0.0.1 whose answers are bytes a test chooses.

`RawServer(script)` reads each request (head and Content-Length body) and hands it to
`script`, which returns an `Answer`: the pieces to write, one write each, and whether to
close the connection after them (or reset it). A script may be async to hold an answer back.
The server counts connections and keeps every request it read (`seen`), so tests can tell a
reused connection from a new one and compare what two clients put on the wire.
`close_idle()` closes the connections that wait for a next request, as a server does when
its keep-alive time is up, and returns once each client has closed its end too.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Seen:
    """One request as the server read it."""

    conn: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    def form(self) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(self.body.decode())


@dataclass(slots=True)
class Answer:
    pieces: list[bytes]
    close: bool = False  # close the connection once sent
    reset: bool = False  # then reset it (RST, not FIN)
    hold: bool = False  # then say nothing more until the server stops (a stalled answer)
    after: asyncio.Event | None = None  # then wait for this before writing `more`
    more: list[bytes] = field(default_factory=list)


def reply(payload: object, *, extra: str = "", status: str = "200 OK") -> bytes:
    body = json.dumps(payload).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


Script = Callable[[Seen], Awaitable[Answer] | Answer]


@dataclass
class RawServer:
    """An HTTP/1.1 server whose answers come from `script`, one per request read."""

    script: Script
    tls: ssl.SSLContext | None = None
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    port: int = 0
    delay: float = 0.0  # seconds before each piece written (a trickling answer)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _idle: dict[int, asyncio.StreamWriter] = field(default_factory=dict)
    _ended: dict[int, asyncio.Event] = field(default_factory=dict)

    async def close_idle(self) -> int:
        """Close every connection idle between requests (FIN); return how many, once each
        client has closed its end as well (it noticed)."""
        idle = dict(self._idle)
        for writer in idle.values():
            writer.write_eof()
        for conn in idle:
            await self._ended[conn].wait()
        return len(idle)

    async def until_seen(self, n: int) -> None:
        """Wait until the server has read `n` requests."""
        while len(self.seen) < n:
            self._arrived.clear()
            await self._arrived.wait()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def api(self, method: str, token: str = "123:abc") -> str:
        return f"{self.url}/bot{token}/{method}"

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        for writer in self.writers:
            writer.close()
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        conn = self.connections
        self.writers.append(writer)
        self._ended[conn] = asyncio.Event()
        try:
            while True:
                self._idle[conn] = writer
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                finally:
                    self._idle.pop(conn, None)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                seen = Seen(conn, method, target, headers, body)
                self.seen.append(seen)
                self._arrived.set()
                answer = self.script(seen)
                if not isinstance(answer, Answer):
                    answer = await answer
                await self._write(writer, answer.pieces)
                if answer.after is not None:
                    await answer.after.wait()
                    await self._write(writer, answer.more)
                if answer.hold:
                    await self._stopping.wait()
                if answer.reset:
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    break
                if answer.close or answer.hold:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            self._ended[conn].set()

    async def _write(self, writer: asyncio.StreamWriter, pieces: list[bytes]) -> None:
        for piece in pieces:
            if self.delay:
                await asyncio.sleep(self.delay)
            writer.write(piece)
            await writer.drain()
