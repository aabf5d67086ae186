"""A fake Slack on 127.0.0.1: Web API methods under /api/, the Socket Mode websocket, files.

Records every Web API call (method, params, headers) and every envelope ack, pushes events
and slash commands over the socket, and has knobs for failures: `fail_next` (429 with
Retry-After, an `ok: false` error, or a dropped connection), `hold` (park a channel's
posts until released), `drop_socket` (clean close or abrupt reset).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

TEAM_ID = "T0001"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
BOT_NAME = "perch"
APP_ID = "A0001"


@dataclass(frozen=True)
class SlackCall:
    """One Web API request as the fake received it."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)

    @property
    def token(self) -> str:
        return self.headers.get("Authorization", "").removeprefix("Bearer ")


@dataclass
class _Failure:
    status: int
    error: str
    retry_after: float | None
    disconnect: bool
    page: str | None = None


@dataclass
class _Posted:
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    edits: list[str] = field(default_factory=list)
    first: str = ""  # the text it was posted with


class FakeSlack:
    """Start with `await fake.start()`; point the client at `fake.base_url`."""

    def __init__(self) -> None:
        self.calls: list[SlackCall] = []
        self.acks: list[dict[str, Any]] = []
        self.connections = 0
        self.messages: dict[str, _Posted] = {}
        self.port = 0
        self._files: dict[str, tuple[bytes, str]] = {}
        self.uploads: dict[str, tuple[str, bytes]] = {}  # file id -> (name, bytes posted)
        self._failures: dict[str, list[_Failure]] = {}
        self._holds: dict[str, asyncio.Event] = {}
        self._ts = itertools.count(1)
        self._changed = asyncio.Condition()
        self._ws: web.WebSocketResponse | None = None
        self._ws_request: web.Request | None = None
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)
        app.router.add_get("/link/", self._link)
        app.router.add_get("/files/{name}", self._file)
        app.router.add_post("/upload/{file_id}", self._upload)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None and not ws.closed:
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- knobs -----------------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        status: int = 429,
        retry_after: float | None = 1,
        error: str = "ratelimited",
        *,
        disconnect: bool = False,
        page: str | None = None,
    ) -> None:
        """The next call to `method` fails: HTTP `status` with `{"ok": false, "error"}` (and
        Retry-After when given), with the HTML `page` instead of JSON when given, or, with
        `disconnect=True`, the connection is cut."""
        self._failures.setdefault(method, []).append(
            _Failure(status, error, retry_after, disconnect, page)
        )

    def hold(self, channel: str) -> asyncio.Event:
        """Park chat.postMessage calls for `channel` until the returned event is set."""
        event = asyncio.Event()
        self._holds[channel] = event
        return event

    def add_file(self, name: str, data: bytes, mimetype: str) -> dict[str, Any]:
        """Serve `data` at a url_private and return the Slack file object for an event."""
        self._files[name] = (data, mimetype)
        return {
            "id": f"F{len(self._files):04d}",
            "name": name,
            "mimetype": mimetype,
            "size": len(data),
            "url_private": f"http://127.0.0.1:{self.port}/files/{name}",
        }

    def calls_to(self, method: str) -> list[SlackCall]:
        return [call for call in self.calls if call.method == method]

    async def wait_for(self, method: str, n: int = 1, timeout: float = 5.0) -> list[SlackCall]:
        """Wait until `method` was called at least `n` times; returns those calls."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.calls_to(method)) >= n), timeout
            )
        return self.calls_to(method)

    async def wait_connections(self, n: int, timeout: float = 5.0) -> None:
        """Wait until the socket was opened `n` times in all (and one is open)."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(
                    lambda: self.connections >= n and self._ws is not None and not self._ws.closed
                ),
                timeout,
            )

    async def push_event(
        self, event: dict[str, Any], *, wait_ack: bool = True, timeout: float = 5.0
    ) -> str:
        """Send an Events API envelope over the socket; by default wait for Bolt's ack."""
        return await self._push("events_api", event_payload(event), wait_ack, timeout)

    async def push_slash_command(
        self, command: str, text: str, channel_id: str, user_id: str, *, timeout: float = 5.0
    ) -> str:
        payload = {
            "token": "verification",
            "team_id": TEAM_ID,
            "team_domain": "fake",
            "channel_id": channel_id,
            "channel_name": "directmessage" if channel_id.startswith("D") else "general",
            "user_id": user_id,
            "user_name": "alice",
            "command": command,
            "text": text,
            "api_app_id": APP_ID,
            "response_url": f"http://127.0.0.1:{self.port}/response",
            "trigger_id": f"trigger-{uuid.uuid4().hex[:8]}",
        }
        return await self._push("slash_commands", payload, True, timeout)

    async def push_action(self, payload: dict[str, Any], *, timeout: float = 5.0) -> str:
        """Send an `interactive` envelope (a button tap's `block_actions`) over the socket."""
        return await self._push("interactive", payload, True, timeout)

    def block_actions(self, card: SlackCall, label: str, user_id: str) -> dict[str, Any]:
        """The payload Slack sends when `user_id` taps the button labelled `label` on the
        message `card` (a chat.postMessage call with blocks)."""
        blocks = card.params["blocks"]
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
        button = next(b for b in buttons if b["text"]["text"] == label)
        channel = str(card.params["channel"])
        text = str(card.params.get("text", ""))
        ts = next(
            t for t, m in reversed(self.messages.items()) if (m.channel, m.first) == (channel, text)
        )
        return {
            "type": "block_actions",
            "team": {"id": TEAM_ID, "domain": "fake"},
            "user": {"id": user_id, "username": user_id.lower(), "name": user_id.lower()},
            "api_app_id": APP_ID,
            "token": "verification",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel},
            "trigger_id": f"trigger-{uuid.uuid4().hex[:8]}",
            "channel": {"id": channel, "name": "directmessage"},
            "message": {"type": "message", "ts": ts, "text": card.params.get("text", "")},
            "response_url": f"http://127.0.0.1:{self.port}/response",
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": next(b["block_id"] for b in blocks if b["type"] == "actions"),
                    "value": button["value"],
                    "text": button["text"],
                    "action_ts": str(time.time()),
                }
            ],
        }

    async def drop_socket(self, clean: bool, *, reset: bool = True) -> None:
        """Close the open socket: a close frame (1000) when clean; otherwise the TCP
        connection goes without a close frame, by a reset or (`reset=False`) a plain FIN."""
        ws, request = self._ws, self._ws_request
        assert ws is not None and request is not None, "no socket to drop"
        if clean:
            await ws.close(code=1000, message=b"bye")
            return
        transport = request.transport
        assert transport is not None
        if not reset:
            transport.close()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def stall_socket(self) -> None:
        """The connection goes silent without closing (a cut network path): nothing more is
        read from it, so pings go unanswered; the next connection works normally."""
        request = self._ws_request
        assert request is not None and request.transport is not None, "no socket to stall"
        request.transport.pause_reading()

    def new_ts(self) -> str:
        n = next(self._ts)
        return f"{1_700_000_000 + n}.{n:06d}"

    # -- handlers --------------------------------------------------------------------------

    async def _record(self, call: SlackCall) -> None:
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()

    async def _api(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(await request.post())
        await self._record(SlackCall(method, params, dict(request.headers)))
        failures = self._failures.get(method)
        if failures:
            failure = failures.pop(0)
            if failure.disconnect:
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=500)
            if failure.page is not None:
                return web.Response(
                    status=failure.status, text=failure.page, content_type="text/html"
                )
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            return web.json_response(
                {"ok": False, "error": failure.error}, status=failure.status, headers=headers
            )
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        body: dict[str, Any] = await handler(params)
        return web.json_response({"ok": True, **body})

    async def _m_auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.com/",
            "team": "Fake",
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    async def _m_apps_connections_open(self, _: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/link/?ticket=x"}

    async def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel"))
        hold = self._holds.get(channel)
        if hold is not None:
            await hold.wait()
        ts = self.new_ts()
        thread_ts = params.get("thread_ts")
        text = str(params.get("text", ""))
        self.messages[ts] = _Posted(channel, ts, text, thread_ts, first=text)
        return {"channel": channel, "ts": ts, "message": {"text": params.get("text"), "ts": ts}}

    async def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"message_ts": self.new_ts()}

    async def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = str(params.get("ts"))
        posted = self.messages.get(ts)
        if posted is None:
            return {"ok": False, "error": "message_not_found"}
        posted.edits.append(str(params.get("text", "")))
        posted.text = str(params.get("text", ""))
        return {"channel": posted.channel, "ts": ts, "text": posted.text}

    async def _m_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        self.messages.pop(str(params.get("ts")), None)
        return {"channel": params.get("channel"), "ts": params.get("ts")}

    async def _m_assistant_threads_setStatus(self, _: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _m_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"FUP{len(self.uploads) + 1:03d}"
        self.uploads[file_id] = (str(params.get("filename")), b"")
        return {"upload_url": f"http://127.0.0.1:{self.port}/upload/{file_id}", "file_id": file_id}

    async def _m_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        files = params.get("files")
        listed = json.loads(files) if isinstance(files, str) else files or []
        return {"files": [{"id": f["id"], "title": f.get("title", "")} for f in listed]}

    async def _m_reactions_add(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _m_reactions_remove(self, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        data = await request.read()
        await self._record(SlackCall("upload:" + file_id, {}, dict(request.headers)))
        if file_id not in self.uploads:
            return web.Response(status=404)
        self.uploads[file_id] = (self.uploads[file_id][0], data)
        return web.Response(text="OK - " + str(len(data)))

    async def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params.get("user"))
        name = user.lower()
        return {
            "user": {
                "id": user,
                "name": name,
                "real_name": name.title(),
                "profile": {"display_name": name.title(), "real_name": name.title()},
            }
        }

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        await self._record(SlackCall("files:" + name, {}, dict(request.headers)))
        if not request.headers.get("Authorization", "").startswith("Bearer xoxb-"):
            return web.Response(text="<html>login</html>", content_type="text/html")
        if name not in self._files:
            return web.Response(status=404)
        data, mimetype = self._files[name]
        return web.Response(body=data, content_type=mimetype)

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        async with self._changed:
            self._ws, self._ws_request = ws, request
            self.connections += 1
            self._changed.notify_all()
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": 1,
                "debug_info": {"host": "fake", "approximate_connection_time": 18060},
                "connection_info": {"app_id": APP_ID},
            }
        )
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            if "envelope_id" in data:
                async with self._changed:
                    self.acks.append(data)
                    self._changed.notify_all()
        async with self._changed:
            if self._ws is ws:
                self._ws = None
            self._changed.notify_all()
        return ws

    async def _push(
        self, kind: str, payload: dict[str, Any], wait_ack: bool, timeout: float
    ) -> str:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: self._ws is not None and not self._ws.closed),
                timeout,
            )
            ws = self._ws
        assert ws is not None
        envelope_id = uuid.uuid4().hex
        await ws.send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": 0,
                "retry_reason": "",
                "payload": payload,
            }
        )
        if wait_ack:
            async with self._changed:
                await asyncio.wait_for(
                    self._changed.wait_for(
                        lambda: any(ack["envelope_id"] == envelope_id for ack in self.acks)
                    ),
                    timeout,
                )
        return envelope_id


def event_payload(event: dict[str, Any]) -> dict[str, Any]:
    """An Events API `event_callback` body around `event`, as Slack sends it."""
    return {
        "token": "verification",
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def sign(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack puts on an Events API request: `v0=` HMAC-SHA256 of `v0:ts:body`."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }
