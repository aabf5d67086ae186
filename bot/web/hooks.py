"""Signed webhooks in: `POST /hooks/<name>` wakes an agent (`hooks:` in config.yaml).

Each call, in order: the endpoint must exist and `hooks.enabled` be true (else 404); the
endpoint's rate (`per_minute`) must have room (else 429 with `Retry-After`); the body must
fit `hooks.max_body` (else 413); the signature must hold (`bot/web/hook_checks.py`; else
401, and nothing runs). The call is then written to the store's inbox under its delivery
id (`X-GitHub-Delivery`, else `Idempotency-Key`, else for the `perch` scheme the signature
itself): the inbox writes an id once, on every backend and across instances sharing a
PostgreSQL store, and keeps it 7 days, so a redelivery or a replayed request runs nothing
(200 `duplicate`; a replayed perch signature 409). The row is closed at once: the run is
not re-run by crash recovery. The answer is 202 with the run id at once; the turn then
runs in the endpoint's agent's session (`isolated`: a fresh one per call, else the named
one), as a message from outside (the input guard reads it), and its reply goes to
`deliver` (`<channel>:<chat>`), or stays in the session (`none`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from bot.config.hub import HookEndpoint, HooksConfig
from bot.kernel.routing import parse_target
from bot.kernel.sessions import SessionKey
from bot.store.roles import Inbox
from bot.web.hook_checks import RateWindow, check_signature, render_message
from bot.web.hub_ports import SystemTurns, TooLarge, read_body
from channels.base import Channel, ChatRef

log = logging.getLogger(__name__)

HOOK_CHANNEL = "hook"  # the channel word in a webhook session's key and inbox row


def _answer(code: int, **data: Any) -> web.Response:
    return web.json_response(data, status=code)


def delivery_id(endpoint: HookEndpoint, headers: Mapping[str, str]) -> str:
    """What makes two calls the same call (see the module's docstring); "" for none."""
    given = headers.get("X-GitHub-Delivery") or headers.get("Idempotency-Key") or ""
    if given:
        return "id:" + given.strip()[:200]
    if endpoint.signature == "perch":
        return "sig:" + headers.get("X-Perch-Signature", "").strip()[:200]
    return ""


def hook_session(name: str, endpoint: HookEndpoint, run_id: str) -> SessionKey:
    """`agent:<agent>:hook:<name>:dm:<run id | session name>`."""
    peer = run_id if endpoint.session == "isolated" else endpoint.session
    return SessionKey.dm(endpoint.agent, HOOK_CHANNEL, name, peer)


class HookRoutes:
    """The `/hooks/<name>` handler of the daemon's web server."""

    def __init__(
        self,
        config: HooksConfig,
        store: Inbox,
        turns: SystemTurns,
        channels: Mapping[str, Channel],
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.store = store
        self.turns = turns
        self.accounts = {name: channel.account for name, channel in channels.items()}
        self.clock = clock
        self.rates = {
            name: RateWindow(e.per_minute, monotonic) for name, e in config.endpoints.items()
        }
        self._running: set[asyncio.Task[object]] = set()

    def install(self, app: web.Application) -> None:
        app.router.add_post("/hooks/{name}", self.receive)

    def target(self, endpoint: HookEndpoint) -> ChatRef | None:
        """Where the reply goes; None keeps it in the session. ValueError if unusable."""
        if endpoint.deliver.strip().lower() == "none":
            return None
        return parse_target(endpoint.deliver.strip(), self.accounts)

    async def receive(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        endpoint = self.config.endpoints.get(name)
        if not self.config.enabled or endpoint is None:
            return _answer(404, error=f"no webhook {name!r}")
        rate = self.rates[name]
        if not rate.admit():
            response = _answer(429, error="too many calls; try again later")
            response.headers["Retry-After"] = str(rate.retry_after())
            return response
        try:
            body = await read_body(request, self.config.max_body)
        except TooLarge:
            return _answer(413, error=f"the body is over {self.config.max_body} bytes")
        why = check_signature(
            endpoint.signature, endpoint.secret, request.headers, body, self.clock()
        )
        if why is not None:
            log.warning("webhook %s: refused a call from %s: %s", name, request.remote, why)
            return _answer(401, error=why)
        try:
            chat = self.target(endpoint)
        except ValueError as exc:
            log.error("webhook %s: hooks.endpoints.%s.deliver: %s", name, name, exc)
            return _answer(503, error=f"hooks.endpoints.{name}.deliver is not usable")
        run_id = uuid.uuid4().hex[:12]
        key = hook_session(name, endpoint, run_id)
        same = delivery_id(endpoint, request.headers)
        row = await self.store.inbox_add(
            HOOK_CHANNEL, name, endpoint.agent, same or f"run:{run_id}", {"run": run_id}, str(key)
        )
        if row is None:
            log.info("webhook %s: delivery %s seen before; nothing runs", name, same)
            if same.startswith("sig:"):
                return _answer(409, error="this signed request was sent before (a replay)")
            return _answer(200, status="duplicate")
        await self.store.inbox_close([row], "hook")
        message = render_message(
            endpoint.message,
            name=name,
            body=body,
            headers=request.headers,
            max_chars=endpoint.max_chars,
        )
        log.info("webhook %s: run %s in %s", name, run_id, key)
        run = self.turns.run_system_turn(
            key, message, chat=chat, when_busy="queue", system=False, run_id=run_id
        )
        task: asyncio.Task[object] = asyncio.create_task(run, name=f"hook-{run_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return _answer(202, id=run_id, status="accepted", session=str(key))
