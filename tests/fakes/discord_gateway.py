"""The fake Discord gateway: the websocket protocol as Discord speaks it, on 127.0.0.1.

HELLO, then IDENTIFY -> READY (+ GUILD_CREATE), or RESUME -> the missed events replayed ->
RESUMED; HEARTBEAT answered with HEARTBEAT_ACK; dispatches numbered with `s` per session.
Payloads are zlib-stream compressed (one compressor per connection, each frame flushed with
Z_SYNC_FLUSH) when the URL asks for `compress=zlib-stream`, as discord.py does by default.
Events dispatched while no socket is open wait in the session, as Discord keeps them for a
resume. Knobs: `drop(clean)` closes the socket with a close frame or cuts the TCP connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

from tests.fakes.discord_payloads import INTENT_MESSAGE_CONTENT, bot_user, snowflake

HELLO, IDENTIFY, RESUME, HEARTBEAT, HEARTBEAT_ACK = 10, 2, 6, 1, 11
DISPATCH, INVALID_SESSION = 0, 9


@dataclass
class _Session:
    id: str
    seq: int = 0
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


class _Connection:
    """One websocket: sends JSON frames, compressed if the client asked for it."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, zlib_stream: bool):
        self.ws = ws
        self.request = request
        self._compressor = zlib.compressobj() if zlib_stream else None
        self.session: _Session | None = None

    async def send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload)
        if self._compressor is None:
            await self.ws.send_str(data)
            return
        body = self._compressor.compress(data.encode()) + self._compressor.flush(zlib.Z_SYNC_FLUSH)
        await self.ws.send_bytes(body)


class FakeGateway:
    """Mounted by `FakeDiscord` at /gateway (and /resume-gateway, READY's resume URL)."""

    def __init__(self, token: str, guild_create: Callable[[], dict[str, Any]]) -> None:
        self.token = token
        self.heartbeat_ms = 41_250
        self.privileged_intents = INTENT_MESSAGE_CONTENT  # what the Developer Portal allows
        self.connections = 0
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.heartbeats = 0
        self.urls: list[str] = []
        self.port = 0
        self._guild_create = guild_create
        self._session: _Session | None = None
        self._live: _Connection | None = None
        self._changed = asyncio.Condition()

    # -- what tests call -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        live = self._live
        return live is not None and live.session is not None and not live.ws.closed

    async def wait(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout)

    async def dispatch(self, event: str, data: dict[str, Any]) -> int:
        """Send an event to the client (kept for a resume if no socket is open); its seq."""
        session = self._session
        assert session is not None, "no gateway session: start the client first"
        session.seq += 1
        payload = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
        session.events.append((session.seq, payload))
        live = self._live
        if live is not None and live.session is session and not live.ws.closed:
            await live.send(payload)
        return session.seq

    async def drop(self, clean: bool) -> None:
        """Close the open socket: a close frame (4000, resumable) when clean; otherwise the
        TCP connection is reset without one."""
        live = self._live
        assert live is not None, "no socket to drop"
        async with self._changed:
            self._live = None
            self._changed.notify_all()
        if clean:
            await live.ws.close(code=4000, message=b"unknown error")
            return
        transport = live.request.transport
        assert transport is not None
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    async def close(self) -> None:
        live, self._live = self._live, None
        if live is not None and not live.ws.closed:
            await live.ws.close(code=WSCloseCode.GOING_AWAY)

    # -- the protocol ----------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        compress = request.query.get("compress")
        if compress not in (None, "zlib-stream"):
            await ws.close(code=4000, message=f"fake: unsupported compress={compress}".encode())
            return ws
        live = _Connection(ws, request, compress == "zlib-stream")
        async with self._changed:
            self.connections += 1
            self.urls.append(str(request.rel_url))
            self._live = live
            self._changed.notify_all()
        await live.send({"op": HELLO, "d": {"heartbeat_interval": self.heartbeat_ms}})
        async for frame in ws:
            if frame.type != WSMsgType.TEXT:
                continue
            message = json.loads(frame.data)
            await self._on_client(live, message)
        async with self._changed:
            if self._live is live:
                self._live = None
            self._changed.notify_all()
        return ws

    async def _on_client(self, live: _Connection, message: dict[str, Any]) -> None:
        op, data = message.get("op"), message.get("d")
        if op == HEARTBEAT:
            async with self._changed:
                self.heartbeats += 1
                self._changed.notify_all()
            await live.send({"op": HEARTBEAT_ACK})
        elif op == IDENTIFY:
            await self._identify(live, data)
        elif op == RESUME:
            await self._resume(live, data)

    async def _identify(self, live: _Connection, data: dict[str, Any]) -> None:
        if data.get("token") != self.token:
            await live.ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(data.get("intents", 0))
        if intents & INTENT_MESSAGE_CONTENT and not self.privileged_intents:
            await live.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        session = _Session(snowflake())
        self._session = session
        live.session = session
        ready = {
            "v": 10,
            "user": bot_user(),
            "guilds": [{"id": self._guild_create()["id"], "unavailable": True}],
            "session_id": session.id,
            "resume_gateway_url": f"ws://127.0.0.1:{self.port}/resume-gateway",
            "application": {"id": bot_user()["id"], "flags": 1 << 19},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
        }
        async with self._changed:
            self.identifies.append(data)
            self._changed.notify_all()
        await self.dispatch("READY", ready)
        await self.dispatch("GUILD_CREATE", self._guild_create())

    async def _resume(self, live: _Connection, data: dict[str, Any]) -> None:
        session = self._session
        if data.get("token") != self.token:
            await live.ws.close(code=4004, message=b"Authentication failed.")
            return
        if session is None or data.get("session_id") != session.id:
            await live.send({"op": INVALID_SESSION, "d": False})
            return
        live.session = session
        async with self._changed:
            self.resumes.append(data)
            self._changed.notify_all()
        after = int(data.get("seq") or 0)
        for seq, payload in list(session.events):
            if seq > after:
                await live.send(payload)
        await self.dispatch("RESUMED", {})
