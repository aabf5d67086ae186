"""The WhatsApp webhook: Meta's verification handshake and signed event posts.

`WebhookServer` listens on `webhook_listen:webhook_port` at `webhook_path`:
- `GET` with `hub.mode=subscribe`, `hub.verify_token` and `hub.challenge` answers the
  challenge when the token is ours (403 otherwise): how Meta checks the callback URL;
- `POST` is processed only when `X-Hub-Signature-256` is `sha256=` + the hex HMAC-SHA256 of
  the raw body keyed with the app secret (`signature_ok`); a missing or wrong signature is
  401, logged at most once a minute, and nothing in it runs. An authentic body is handed to
  the adapter, which answers with the status: 200 once its messages are in the inbox, so an
  instance killed before that never acknowledged them and Meta delivers them again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from channels.whatsapp.options import WhatsAppOptions

log = logging.getLogger("channels.whatsapp")

SIGNATURE_HEADER = "X-Hub-Signature-256"
MAX_BODY = 3 * 1024 * 1024  # Meta's posts are small; a larger one is not Meta
_REFUSAL_LOG_EVERY = 60.0

EventHandler = Callable[[Any], Awaitable[int]]  # the JSON body -> the HTTP status to answer


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value Meta sends for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_ok(secret: str, body: bytes, given: str | None) -> bool:
    """True when `given` is the signature of `body` under `secret` (compared in constant time)."""
    if not given or not secret:
        return False
    return hmac.compare_digest(given.strip().encode(), signature(secret, body).encode())


class WebhookServer:
    """Listens once `start()` ran until `stop()`; `port` is the one bound (for port 0)."""

    def __init__(self, options: WhatsAppOptions, on_event: EventHandler) -> None:
        self._opt = options
        self._on_event = on_event
        self._runner: web.AppRunner | None = None
        self._last_refusal_log = -_REFUSAL_LOG_EVERY
        self._refused_since_log = 0
        self.port = options.webhook_port

    async def start(self) -> None:
        if self._runner is not None:
            return
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get(self._opt.webhook_path, self._on_verify)
        app.router.add_post(self._opt.webhook_path, self._on_post)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self._opt.webhook_listen, self._opt.webhook_port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        if runner.addresses:
            self.port = int(runner.addresses[0][1])
        self._runner = runner

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_verify(self, request: web.Request) -> web.Response:
        query = request.query
        token = query.get("hub.verify_token", "")
        if query.get("hub.mode") == "subscribe" and hmac.compare_digest(
            token.encode(), self._opt.verify_token.encode()
        ):
            log.info("WhatsApp webhook verified by Meta")
            return web.Response(text=query.get("hub.challenge", ""))
        log.warning("WhatsApp webhook: a verification request with the wrong verify_token")
        return web.Response(status=403)

    async def _on_post(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413)
        if not signature_ok(self._opt.app_secret, body, request.headers.get(SIGNATURE_HEADER)):
            self._log_refusal(request)
            return web.Response(status=401)
        try:
            payload = json.loads(body)
        except ValueError:
            log.warning("WhatsApp webhook: a signed post that is not JSON; ignored")
            return web.Response(status=400)
        return web.Response(status=await self._on_event(payload))

    def _log_refusal(self, request: web.Request) -> None:
        """One line a minute however many forged or unsigned posts arrive."""
        self._refused_since_log += 1
        now = time.monotonic()
        if now - self._last_refusal_log < _REFUSAL_LOG_EVERY:
            return
        what = "no" if SIGNATURE_HEADER not in request.headers else "a wrong"
        log.warning(
            "WhatsApp webhook: refused %d post(s) with %s %s (from %s); check "
            "channels.whatsapp.app_secret if Meta's own posts are refused",
            self._refused_since_log,
            what,
            SIGNATURE_HEADER,
            request.remote,
        )
        self._last_refusal_log = now
        self._refused_since_log = 0
