"""A fake signal-cli-rest-api in json-rpc mode, on 127.0.0.1, for the Signal adapter's tests.

Serves `/v1/health`, `/v1/about`, `/v1/groups/{number}`, the receive websocket
`/v1/receive/{number}`, `/v2/send`, `/v1/typing-indicator/{number}`, `/v1/reactions/{number}`,
`/v1/receipts/{number}` and `/v1/attachments/{id}`, answering JSON as text/plain like the real
one. Tests push envelopes shaped like signal-cli's receive output, break the socket, inject
failures and assert on every request recorded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

JSON_AS_TEXT = "text/plain"


@dataclass
class Recorded:
    """One request as the fake saw it (`status` is what it answered)."""

    method: str
    path: str
    body: Any
    status: int
    authorization: str | None = None


@dataclass
class _Failure:
    path: str
    status: int
    body: Any
    headers: dict[str, str]
    times: int


@dataclass
class _Group:
    internal_id: str
    name: str
    members: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return "group." + base64.b64encode(self.internal_id.encode()).decode()


class FakeSignal:
    """The fake server. `start()` on port 0 (or a given port), `url` to point the client at."""

    def __init__(self, number: str = "+15550000001", *, mode: str = "json-rpc") -> None:
        self.number = number
        self.mode = mode
        self.version = "0.101.0"
        self.uuid = "bbbbbbbb-0000-4000-8000-000000000001"
        self.requests: list[Recorded] = []
        self.sent: list[dict[str, Any]] = []
        self.send_response_as_list = False
        self.ws_connections = 0
        self._groups: dict[str, _Group] = {}
        self._attachments: dict[str, tuple[bytes, str]] = {}
        self._failures: list[_Failure] = []
        self._held: dict[str, asyncio.Event] = {}
        self._sockets: list[tuple[web.WebSocketResponse, asyncio.Transport | None]] = []
        self._pending: list[str] = []
        self._changed = asyncio.Condition()
        self._clock = itertools.count(int(time.time() * 1000))
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle --

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_get("/v1/health", self._health)
        app.router.add_get("/v1/about", self._about)
        app.router.add_get("/v1/groups/{number}", self._groups_list)
        app.router.add_get("/v1/receive/{number}", self._receive)
        app.router.add_post("/v2/send", self._send)
        app.router.add_route("PUT", "/v1/typing-indicator/{number}", self._no_content)
        app.router.add_route("DELETE", "/v1/typing-indicator/{number}", self._no_content)
        app.router.add_post("/v1/reactions/{number}", self._no_content)
        app.router.add_route("DELETE", "/v1/reactions/{number}", self._no_content)
        app.router.add_post("/v1/receipts/{number}", self._no_content)
        app.router.add_get("/v1/attachments/{attachment}", self._attachment)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        for ws, _ in list(self._sockets):
            with contextlib.suppress(Exception):
                await ws.close(code=1001)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeSignal:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- knobs --

    def next_timestamp(self) -> int:
        return next(self._clock)

    def set_mode(self, mode: str) -> None:
        self.mode = mode

    def add_group(
        self, internal_id: str, name: str = "Team", members: list[str] | None = None
    ) -> str:
        """Make the bot a member of a group; returns its `group.<base64>` id."""
        group = _Group(internal_id, name, list(members or []))
        self._groups[internal_id] = group
        return group.id

    def add_attachment(
        self, attachment_id: str, data: bytes, content_type: str = "image/png", *, size: bool = True
    ) -> dict[str, Any]:
        """Store a file and return the attachment JSON an envelope carries."""
        self._attachments[attachment_id] = (data, content_type)
        attachment: dict[str, Any] = {
            "contentType": content_type,
            "filename": f"{attachment_id}.bin",
            "id": attachment_id,
        }
        if size:
            attachment["size"] = len(data)
        return attachment

    def fail_next(
        self,
        path: str,
        status: int,
        *,
        times: int = 1,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next `times` requests whose path starts with `path` with `status`;
        `body` is sent as JSON, or as an HTML page when it is a string."""
        payload = body if body is not None else {"error": f"injected failure {status}"}
        self._failures.append(_Failure(path, status, payload, dict(headers or {}), times))

    def hold_sends_to(self, recipient: str) -> asyncio.Event:
        """Keep `/v2/send` requests for `recipient` waiting until the returned event is set."""
        event = asyncio.Event()
        self._held[recipient] = event
        return event

    async def push_envelope(self, envelope: dict[str, Any]) -> None:
        """Send `{"envelope": ..., "account": number}` to every receiver (kept until one comes)."""
        frame = json.dumps({"envelope": envelope, "account": self.number})
        await self.push_raw(frame)

    async def push_raw(self, frame: str) -> None:
        if not self._sockets:
            self._pending.append(frame)
            return
        for ws, _ in list(self._sockets):
            await ws.send_str(frame)

    def envelope(
        self,
        sender: str | None,
        data_message: dict[str, Any] | None = None,
        *,
        sender_uuid: str | None = None,
        name: str = "Alice",
        timestamp: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        stamp = timestamp if timestamp is not None else self.next_timestamp()
        envelope: dict[str, Any] = {
            "source": sender or sender_uuid,
            "sourceNumber": sender,
            "sourceUuid": sender_uuid
            or f"aaaaaaaa-0000-4000-8000-{zlib.crc32(str(sender).encode()):012d}",
            "sourceName": name,
            "sourceDevice": 1,
            "timestamp": stamp,
            "serverReceivedTimestamp": stamp + 5,
            "serverDeliveredTimestamp": stamp + 9,
        }
        if data_message is not None:
            envelope["dataMessage"] = {
                "timestamp": stamp,
                "message": None,
                "expiresInSeconds": 0,
                "viewOnce": False,
                **data_message,
            }
        envelope.update(extra)
        return envelope

    async def dm(self, sender: str | None, text: str | None, **fields: Any) -> int:
        """A direct message from `sender`; extra dataMessage fields (mentions, quote,
        attachments) and envelope options (sender_uuid, name, timestamp) pass through."""
        options = {k: fields.pop(k) for k in ("sender_uuid", "name", "timestamp") if k in fields}
        envelope = self.envelope(sender, {"message": text, **fields}, **options)
        await self.push_envelope(envelope)
        return int(envelope["timestamp"])

    async def group_message(
        self, sender: str, internal_group_id: str, text: str | None, **fields: Any
    ) -> int:
        """A message in a v2 group (by internal id, as signal-cli reports it)."""
        group = self._groups.get(internal_group_id)
        group_info = {
            "groupId": internal_group_id,
            "groupName": group.name if group else "Team",
            "revision": 1,
            "type": "DELIVER",
        }
        return await self.dm(sender, text, groupInfo=group_info, **fields)

    def mention_of_bot(self, start: int, *, with_number: bool = True) -> dict[str, Any]:
        return {
            "name": self.number,
            "number": self.number if with_number else None,
            "uuid": self.uuid,
            "start": start,
            "length": 1,
        }

    async def close_socket(self, code: int = 1000, *, abort: bool = False) -> None:
        """End every receive socket: a clean close with `code`, or a dropped connection."""
        for ws, transport in list(self._sockets):
            if abort and transport is not None:
                transport.abort()
            else:
                await ws.close(code=code, message=b"bye")

    async def wait_for(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        """Wait until `predicate()` holds (re-checked on every request and socket change)."""
        try:
            async with asyncio.timeout(within):
                async with self._changed:
                    await self._changed.wait_for(predicate)
        except TimeoutError:
            raise AssertionError(
                f"fake signal-cli-rest-api: condition not met within {within}s; "
                f"requests so far: {[(r.method, r.path, r.status) for r in self.requests]}"
            ) from None

    async def wait_connected(self, count: int = 1, within: float = 5.0) -> None:
        """Wait until `count` receive sockets were opened in total and one is open now."""
        await self.wait_for(lambda: self.ws_connections >= count and bool(self._sockets), within)

    def requests_to(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    # -- handlers --

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _record(self, request: web.Request, status: int) -> Any:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        auth = request.headers.get("Authorization")
        self.requests.append(Recorded(request.method, request.path, body, status, auth))
        await self._notify()
        return body

    def _take_failure(self, path: str) -> _Failure | None:
        for failure in self._failures:
            if path.startswith(failure.path) and failure.times > 0:
                failure.times -= 1
                if failure.times == 0:
                    self._failures.remove(failure)
                return failure
        return None

    async def _failed(self, request: web.Request) -> web.Response | None:
        failure = self._take_failure(request.path)
        if failure is None:
            return None
        await self._record(request, failure.status)
        if isinstance(failure.body, str):  # an error page, as a proxy in front serves it
            return web.Response(status=failure.status, text=failure.body, content_type="text/html")
        return web.Response(
            status=failure.status,
            text=json.dumps(failure.body),
            content_type=JSON_AS_TEXT,
            headers=failure.headers,
        )

    def _json(self, data: Any, status: int = 200) -> web.Response:
        return web.Response(status=status, text=json.dumps(data), content_type=JSON_AS_TEXT)

    def _wrong_number(self, request: web.Request) -> bool:
        return request.match_info.get("number", self.number) != self.number

    async def _health(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        await self._record(request, 204)
        return web.Response(status=204)

    async def _about(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        await self._record(request, 200)
        return self._json(
            {
                "versions": ["v1", "v2"],
                "build": 2,
                "mode": self.mode,
                "version": self.version,
                "capabilities": {"v2/send": ["quotes", "mentions"]},
            }
        )

    async def _groups_list(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        await self._record(request, 200)
        return self._json(
            [
                {
                    "name": group.name,
                    "id": group.id,
                    "internal_id": group.internal_id,
                    "members": group.members,
                    "blocked": False,
                    "pending_invites": [],
                    "pending_requests": [],
                    "invite_link": "",
                    "admins": [],
                }
                for group in self._groups.values()
            ]
        )

    async def _receive(self, request: web.Request) -> web.StreamResponse:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        if self._wrong_number(request) or self.mode != "json-rpc":
            await self._record(request, 400)
            return self._json({"error": "websocket receive needs json-rpc mode"}, 400)
        ws = web.WebSocketResponse(heartbeat=None)
        await ws.prepare(request)
        entry = (ws, request.transport)
        self._sockets.append(entry)
        self.ws_connections += 1
        await self._record(request, 101)
        pending, self._pending = self._pending, []
        for frame in pending:
            await ws.send_str(frame)
        try:
            async for _ in ws:
                pass  # the real server ignores what clients send
        finally:
            self._sockets.remove(entry)
            await self._notify()
        return ws

    async def _send(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        body = await self._record(request, 201)
        if not isinstance(body, dict) or body.get("number") != self.number:
            self.requests[-1].status = 400
            return self._json({"error": "Couldn't process request - invalid request"}, 400)
        for recipient in body.get("recipients") or []:
            held = self._held.get(recipient)
            if held is not None:
                await held.wait()
        stamp = self.next_timestamp()
        body["_timestamp"] = stamp
        self.sent.append(body)
        await self._notify()
        answer: Any = {"timestamp": str(stamp)}
        return self._json([answer] if self.send_response_as_list else answer, 201)

    async def _no_content(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        if self._wrong_number(request):
            await self._record(request, 400)
            return self._json({"error": "unknown number"}, 400)
        await self._record(request, 204)
        return web.Response(status=204)

    async def _attachment(self, request: web.Request) -> web.Response:
        failed = await self._failed(request)
        if failed is not None:
            return failed
        stored = self._attachments.get(request.match_info["attachment"])
        if stored is None:
            await self._record(request, 400)
            return self._json({"error": "attachment not found"}, 400)
        await self._record(request, 200)
        data, content_type = stored
        return web.Response(body=data, content_type=content_type)
