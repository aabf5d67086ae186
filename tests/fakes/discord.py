"""A fake Discord on 127.0.0.1: the REST API under /api/v10, the gateway, attachment files.

Records every REST call, keeps the messages the bot posted (with their edits), answers with
Discord's rate-limit headers from real buckets (`limit_bucket` tightens one), and can fail
calls (`fail_next`: a 429 with `retry_after`, as Discord sends it, or any other status) or
park a channel's posts (`hold`). Messages the bot posts come back over the gateway as
MESSAGE_CREATE, edits as MESSAGE_UPDATE, threads it starts as THREAD_CREATE, as on Discord.
`dm`, `guild_message` and `slash` put what a person does on the gateway.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes import discord_payloads as p
from tests.fakes.discord_gateway import FakeGateway
from tests.fakes.discord_payloads import ALICE, BOB, OTHER_BOT
from tests.fakes.discord_routes import HANDLERS, ROUTES, json_answer

__all__ = ["ALICE", "BOB", "OTHER_BOT", "DiscordCall", "FakeDiscord", "Posted"]


@dataclass(frozen=True)
class DiscordCall:
    """One REST request as the fake received it (`route` is the template, e.g.
    "POST /channels/{channel_id}/messages")."""

    route: str
    params: dict[str, str]
    body: dict[str, Any]
    headers: dict[str, str]
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    at: float = field(default_factory=time.monotonic)


@dataclass
class Posted:
    channel_id: str
    id: str
    content: str
    reference: str | None
    edits: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)  # buttons, as sent

    @property
    def buttons(self) -> dict[str, str]:
        """Label -> custom_id of the buttons the message shows now."""
        return {
            b["label"]: b["custom_id"] for row in self.components for b in row.get("components", [])
        }


@dataclass
class _Failure:
    status: int
    retry_after: float
    body: dict[str, Any] | None


@dataclass
class _Bucket:
    limit: int
    window: float
    used: int = 0
    reset_at: float = 0.0


class FakeDiscord:
    """`async with FakeDiscord() as fake:`; point the client at `fake.api_base`."""

    def __init__(self) -> None:
        self.calls: list[DiscordCall] = []
        self.messages: dict[str, Posted] = {}
        self.channels: dict[str, dict[str, Any]] = {
            p.CHANNEL_ID: p.text_channel(p.CHANNEL_ID, "general"),
            p.OTHER_CHANNEL_ID: p.text_channel(p.OTHER_CHANNEL_ID, "random"),
        }
        self.threads: dict[str, dict[str, Any]] = {}
        self.commands: list[dict[str, Any]] = []
        self.dm_channels: dict[str, str] = {}  # user id -> DM channel id
        self.gateway = FakeGateway(p.TOKEN, self._guild_create)
        self.port = 0
        self._files: dict[str, tuple[bytes, str]] = {}
        self._failures: dict[str, list[_Failure]] = {}
        self._holds: dict[str, asyncio.Event] = {}
        self._buckets: dict[str, _Bucket] = {}
        self._limits: dict[str, tuple[int, float]] = {}
        self._nonces: dict[tuple[str, str], Posted] = {}
        self.rate_limited = 0  # 429s a bucket (not `fail_next`) answered
        self.changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    async def __aenter__(self) -> FakeDiscord:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/gateway", self.gateway.handle)
        app.router.add_get("/resume-gateway", self.gateway.handle)
        app.router.add_get("/attachments/{name}", self._attachment)
        for method, template in ROUTES:
            app.router.add_route(method, "/api/v10" + template, self._rest)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.gateway.port = self.port

    async def stop(self) -> None:
        await self.gateway.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- knobs -----------------------------------------------------------------------------

    def fail_next(
        self, route: str, status: int = 429, retry_after: float = 0.2, *, times: int = 1
    ) -> None:
        """The next `times` calls to `route` fail with `status` (429: Discord's rate-limit
        answer with `retry_after` in the body and the Retry-After header)."""
        for _ in range(times):
            self._failures.setdefault(route, []).append(_Failure(status, retry_after, None))

    def limit_bucket(self, route: str, limit: int, window: float) -> None:
        """Allow `limit` calls to `route` per channel in each `window` seconds."""
        self._limits[route] = (limit, window)

    def hold(self, channel_id: str) -> asyncio.Event:
        """Park message posts to `channel_id` until the returned event is set."""
        event = asyncio.Event()
        self._holds[channel_id] = event
        return event

    def add_file(self, name: str, data: bytes, content_type: str, **extra: Any) -> dict[str, Any]:
        """Serve `data` as an attachment and return its attachment object."""
        self._files[name] = (data, content_type)
        url = f"http://127.0.0.1:{self.port}/attachments/{name}"
        return p.attachment(url, name, data, content_type, **extra)

    def add_thread(self, parent_id: str = p.CHANNEL_ID, owner_id: str = ALICE["id"]) -> str:
        """A thread people opened in `parent_id`, known to the guild; its id."""
        thread_id = p.snowflake()
        self.threads[thread_id] = p.thread(thread_id, parent_id, "a thread", owner_id)
        return thread_id

    def calls_to(self, route: str) -> list[DiscordCall]:
        return [call for call in self.calls if call.route == route]

    async def wait_for(self, route: str, n: int = 1, timeout: float = 5.0) -> list[DiscordCall]:
        """Wait until `route` was called at least `n` times; returns those calls."""
        await self.wait(lambda: len(self.calls_to(route)) >= n, timeout)
        return self.calls_to(route)

    async def wait(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(condition), timeout)

    def posted_in(self, channel_id: str) -> list[Posted]:
        return [m for m in self.messages.values() if m.channel_id == channel_id]

    # -- what people do --------------------------------------------------------------------

    async def dm(self, text: str, sender: dict[str, Any] = ALICE, **extra: Any) -> dict[str, Any]:
        channel_id = self.dm_channels.setdefault(sender["id"], p.snowflake())
        message = p.message(channel_id, sender, text, **extra)
        await self.gateway.dispatch("MESSAGE_CREATE", message)
        return message

    async def guild_message(
        self,
        text: str,
        sender: dict[str, Any] = ALICE,
        channel_id: str = p.CHANNEL_ID,
        *,
        mention: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        """A message in a guild channel or thread; `mention` puts `<@bot>` in front."""
        content = f"<@{p.BOT_ID}> {text}" if mention else text
        mentions = [p.bot_user()] if mention else []
        message = p.message(
            channel_id, sender, content, guild_id=p.GUILD_ID, mentions=mentions, **extra
        )
        await self.gateway.dispatch("MESSAGE_CREATE", message)
        return message

    async def slash(
        self,
        name: str,
        sender: dict[str, Any] = ALICE,
        channel_id: str | None = None,
        argument: str | None = None,
    ) -> dict[str, Any]:
        """A slash command used in a guild channel, or (no `channel_id`) in the DM."""
        if channel_id is None:
            dm_id = self.dm_channels.setdefault(sender["id"], p.snowflake())
            channel = {"id": dm_id, "type": 1, "recipients": [sender]}
            data = p.interaction(name, sender, channel, argument=argument)
        else:
            channel = self.threads.get(channel_id) or self.channels[channel_id]
            data = p.interaction(name, sender, channel, argument=argument, guild_id=p.GUILD_ID)
        await self.gateway.dispatch("INTERACTION_CREATE", data)
        return data

    async def tap(
        self, posted: Posted, label: str, sender: dict[str, Any] = ALICE
    ) -> dict[str, Any]:
        """`sender` taps the button labelled `label` under the bot's message `posted` (in a
        DM): a component interaction (type 3) on the gateway."""
        message = p.message(posted.channel_id, p.bot_user(), posted.content, message_id=posted.id)
        message["components"] = posted.components
        channel = {"id": posted.channel_id, "type": 1, "recipients": [sender]}
        data = p.interaction("", sender, channel)
        data["type"] = 3
        data["data"] = {"custom_id": posted.buttons[label], "component_type": 2}
        data["message"] = message
        await self.gateway.dispatch("INTERACTION_CREATE", data)
        return data

    # -- REST ------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        route = f"{request.method} {request.match_info.route.resource.canonical[len('/api/v10') :]}"  # type: ignore[union-attr]
        body, files = await _read_body(request)
        call = DiscordCall(route, dict(request.match_info), body, dict(request.headers), files)
        async with self.changed:
            self.calls.append(call)
            self.changed.notify_all()
        needs_token = not route.startswith(
            ("POST /interactions", "PATCH /webhooks", "POST /webhooks", "DELETE /webhooks")
        )
        if needs_token and request.headers.get("Authorization") != f"Bot {p.TOKEN}":
            return json_answer({"message": "401: Unauthorized", "code": 0}, status=401)
        major = call.params.get("channel_id") or call.params.get("interaction_id") or ""
        headers = self._rate_headers(route, major)
        failures = self._failures.get(route)
        if failures:
            return _failure_response(failures.pop(0), headers)
        if headers.get("X-RateLimit-Remaining") == "-1":
            self.rate_limited += 1
            bucket = self._buckets[f"{route}:{major}"]
            wait = max(0.0, bucket.reset_at - time.monotonic())
            return _failure_response(_Failure(429, round(wait, 3), None), {})
        handler = HANDLERS[route]
        result = await handler(self, call)
        if isinstance(result, web.StreamResponse):
            return result
        if result is None:
            return web.Response(status=204, headers=headers)
        return json_answer(result, headers=headers)

    def _rate_headers(self, route: str, major: str) -> dict[str, str]:
        limit, window = self._limits.get(route, (50, 1.0))
        key = f"{route}:{major}"
        bucket = self._buckets.setdefault(key, _Bucket(limit, window))
        now = time.monotonic()
        if now >= bucket.reset_at:
            bucket.used, bucket.reset_at = 0, now + window
        bucket.used += 1
        remaining = limit - bucket.used
        reset_after = max(0.0, bucket.reset_at - now)
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(max(remaining, -1)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": f"bucket-{abs(hash(route)) % 10**8}",
            "Via": "1.1 google",
        }

    def _guild_create(self) -> dict[str, Any]:
        return p.guild(list(self.channels.values()), list(self.threads.values()))

    async def post_message(self, channel_id: str, body: dict[str, Any], files: list[str]) -> Any:
        hold = self._holds.get(channel_id)
        if hold is not None:
            await hold.wait()
        nonce = body.get("nonce")
        if body.get("enforce_nonce") and nonce and (channel_id, nonce) in self._nonces:
            earlier = self._nonces[(channel_id, nonce)]  # Discord answers with the first one
            return p.message(channel_id, p.bot_user(), earlier.content, message_id=earlier.id)
        reference = (body.get("message_reference") or {}).get("message_id")
        reference = str(reference) if reference is not None else None
        guild = p.GUILD_ID if channel_id in self.channels or channel_id in self.threads else None
        message = p.message(
            channel_id, p.bot_user(), str(body.get("content") or ""), guild_id=guild
        )
        posted = Posted(channel_id, message["id"], message["content"], reference, files=files)
        posted.components = list(body.get("components") or [])
        message["components"] = posted.components
        async with self.changed:
            self.messages[message["id"]] = posted
            if nonce:
                self._nonces[(channel_id, nonce)] = posted
            self.changed.notify_all()
        await self.gateway.dispatch("MESSAGE_CREATE", message)
        return message

    async def _attachment(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._files:
            return web.Response(status=404)
        data, content_type = self._files[name]
        return web.Response(body=data, content_type=content_type)


async def _read_body(request: web.Request) -> tuple[dict[str, Any], dict[str, tuple[str, bytes]]]:
    if not request.can_read_body:
        return {}, {}
    if request.content_type == "multipart/form-data":
        form = await request.post()
        body = json.loads(str(form.get("payload_json") or "{}"))
        files = {
            key: (value.filename, value.file.read())
            for key, value in form.items()
            if isinstance(value, web.FileField)
        }
        return body, files
    text = await request.text()
    return (json.loads(text) if text else {}), {}


def _failure_response(failure: _Failure, headers: dict[str, str]) -> web.Response:
    if failure.status == 429:
        body = {"message": "You are being rate limited.", "retry_after": failure.retry_after}
        return json_answer(
            {**body, "global": False},
            status=429,
            headers={
                **headers,
                "Retry-After": str(max(1, round(failure.retry_after))),
                "X-RateLimit-Scope": "user",
                "Via": "1.1 google",
            },
        )
    return json_answer(
        failure.body or {"message": f"fake failure {failure.status}", "code": 0},
        status=failure.status,
        headers=headers,
    )
