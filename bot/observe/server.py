"""`GET /metrics`: the daemon's Prometheus series on `metrics.listen`, a small aiohttp app on
a port of its own.

Before each scrape the gauges are read from the parts that know them: which channels are
up (a standby channel, received by another instance, counts as down here), how many turns
run, how many inbox rows are unfinished (one store query) and the day's spend. With
`metrics.token` set, a scrape without `Authorization: Bearer <token>` gets 401 (compared in
constant time). The text format is Prometheus' (OpenMetrics when the scraper asks for it),
gzipped when the scraper accepts it. Any other path is 404.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from bot.config.observe import MetricsConfig, split_listen
from channels.base import Channel

if TYPE_CHECKING:
    from bot.observe.metrics import PerchMetrics

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0  # a store that hangs must not hang the scrape


class Receivers(Protocol):
    def standby(self, name: str) -> bool: ...


class RunCount(Protocol):
    def status(self) -> dict[str, Any]: ...  # the gateway's: active_runs


class PendingInbox(Protocol):
    async def inbox_pending(self) -> list[Any]: ...


class Spend(Protocol):
    async def spent_today(self) -> float: ...


class MetricsServer:
    """Serves one daemon's `PerchMetrics` on `settings.listen`."""

    def __init__(
        self,
        settings: MetricsConfig,
        metrics: PerchMetrics,
        channels: Mapping[str, Channel],
        receivers: Receivers,
        runs: RunCount,
        inbox: PendingInbox,
        budget: Spend,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.channels = channels
        self.receivers = receivers
        self.runs = runs
        self.inbox = inbox
        self.budget = budget
        self.host, self.port = split_listen(settings.listen)
        self._token = (settings.token or "").encode()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        """Listen (raises OSError, e.g. when the port is taken)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family)
        self.port = sock.getsockname()[1]  # `listen: host:0` picks a free port
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("metrics at %s%s", self.url, " (bearer token required)" if self._token else "")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def status(self) -> dict[str, Any]:
        return {"metrics_endpoint": self.url}

    async def refresh(self) -> None:
        """Read the gauges from the running daemon."""
        metrics = self.metrics
        for name, channel in self.channels.items():
            up = channel.status().up and not self.receivers.standby(name)
            metrics.channel_up.labels(name).set(1 if up else 0)
        metrics.runs_active.set(int(self.runs.status().get("active_runs", 0)))
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                metrics.inbox_pending.set(len(await self.inbox.inbox_pending()))
                metrics.budget_today.set(await self.budget.spent_today())
        except Exception as exc:  # the scrape still answers, with the last values
            log.warning("metrics: reading the store for the gauges failed: %s", exc)

    def _authorised(self, request: web.Request) -> bool:
        if not self._token:
            return True
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode(), self._token
        )

    async def _scrape(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return web.Response(
                status=401,
                text="metrics need Authorization: Bearer <metrics.token>\n",
                headers={"WWW-Authenticate": 'Bearer realm="perch metrics"'},
            )
        from prometheus_client.exposition import choose_encoder

        await self.refresh()
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        response = web.Response(body=encode(self.metrics.registry))
        response.headers["Content-Type"] = content_type
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            response.enable_compression()
        return response
