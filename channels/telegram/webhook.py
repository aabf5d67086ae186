"""The Telegram webhook listener: an aiohttp server that checks Telegram's secret token.

`WebhookServer` listens on `webhook_listen:webhook_port` at the path of `webhook_url` and
hands each authentic post's JSON body to the adapter, which answers with an HTTP status: 200
only once the update is handed on (written to the inbox), so an instance killed before that
never acknowledged it and Telegram delivers it again. A post without the right
`X-Telegram-Bot-Api-Secret-Token` gets 403, a body that is not JSON 400.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from channels.telegram.options import TelegramOptions
from channels.telegram.redaction import LOGGER_NAME

log = logging.getLogger(LOGGER_NAME)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

UpdateHandler = Callable[[Any], Awaitable[int]]  # the JSON body -> the HTTP status to answer


class WebhookServer:
    """Listens once `start()` ran (again: a no-op) until `stop()`."""

    def __init__(self, options: TelegramOptions, on_update: UpdateHandler) -> None:
        self._opt = options
        self._on_update = on_update
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        if self._runner is not None:
            return
        opt = self._opt
        server = web.Application()
        server.router.add_post(urlsplit(opt.webhook_url).path or "/", self._on_post)
        runner = web.AppRunner(server, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        try:
            await web.TCPSite(runner, opt.webhook_listen, opt.webhook_port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_post(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self._opt.webhook_secret.encode()):
            log.warning("Telegram webhook: refused a post without the right secret token")
            return web.Response(status=403)
        try:
            payload = await request.json()
        except ValueError as exc:
            log.warning("Telegram webhook: unreadable update (%s)", exc)
            return web.Response(status=400)
        return web.Response(status=await self._on_update(payload))
