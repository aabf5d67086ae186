"""The daemon's faces, built last: what reports on it and what it is reached through.

`build_faces` makes, on the built hub: the metrics server (`GET /metrics`, when
`metrics.enabled`), the status every part reports into (`perch status`, the status file), the
instance's beacon, the control socket (`perch` commands and the dashboard change things through
the same `DaemonControl`), and the web server when the dashboard, webhooks (`hooks:`) or the
OpenAI-compatible API (`api:`) are on. Part of `bot/build.py`'s graph: nothing here is made
anywhere else, and the gateway is passed in, never imported (it is a type here only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.skills.catalog import SkillCatalog
from bot.cluster.instances import InstanceBeacon
from bot.cluster.receivers import Cluster
from bot.config.paths import socket_path
from bot.config.schema import Config
from bot.cron.scheduler import Scheduler
from bot.kernel.budget import Budget
from bot.observe.server import MetricsServer
from bot.observe.telemetry import Telemetry
from bot.operator.control_server import ControlServer, DaemonControl
from bot.process.status import DaemonStatus, StatusSource
from bot.store.roles import Store
from bot.tools.mcp import McpHost
from bot.web.hooks import HookRoutes
from bot.web.openai_api import OpenAIRoutes
from bot.web.server import DashboardAddress, Routes, WebServer
from channels.base import Channel

if TYPE_CHECKING:
    from bot.hub.gateway import Gateway


@dataclass(frozen=True, slots=True)
class Faces:
    """What `build_faces` made (see the module's docstring)."""

    metrics: MetricsServer | None
    status: DaemonStatus
    beacon: InstanceBeacon
    control: ControlServer
    web: WebServer | None


def build_faces(
    config: Config,
    store: Store,
    instance_id: str,
    *,
    gateway: Gateway,
    channels: Mapping[str, Channel],
    cluster: Cluster,
    scheduler: Scheduler,
    budget: Budget,
    telemetry: Telemetry,
    mcp: McpHost,
    skills: SkillCatalog,
    index_writes: Sequence[Callable[[], Awaitable[None]]] = (),
) -> Faces:
    metrics = None
    if telemetry.metrics is not None:
        metrics = MetricsServer(
            config.metrics, telemetry.metrics, channels, cluster, gateway, store, budget
        )
    reporting: list[StatusSource] = [gateway, scheduler, mcp, telemetry]
    reporting += [metrics] if metrics is not None else []
    # The dashboard's address is made first: the status reports it, the server binds it.
    # The server also runs for webhooks or the API alone (bot/web/hooks.py, openai_api.py).
    routes = web_routes(config, store, gateway, channels)
    serving = config.web.enabled or bool(routes)
    address = DashboardAddress(config.web.listen, dashboard=config.web.enabled) if serving else None
    reporting += [address] if address is not None else []
    status = DaemonStatus(config, channels, cluster, reporting)
    beacon = InstanceBeacon(store, status.snapshot, instance_id)
    live = DaemonControl(
        config, gateway, scheduler, budget, channels, status.snapshot, gateway.commands, telemetry,
        index_writes=index_writes,
    )  # fmt: skip
    control = ControlServer(socket_path(config), config, store, live)
    web = None
    if address is not None:
        web = WebServer(
            address, config, store, live, skills, instance_id,
            dashboard=config.web.enabled, routes=routes,
        )  # fmt: skip
    return Faces(metrics, status, beacon, control, web)


def web_routes(
    config: Config, store: Store, gateway: Gateway, channels: Mapping[str, Channel]
) -> list[Routes]:
    """The handlers served beside the dashboard: webhooks (`hooks:`), the API (`api:`)."""
    routes: list[Routes] = []
    if config.hooks.enabled:
        routes.append(HookRoutes(config.hooks, store, gateway, channels))
    if config.api.enabled:
        routes.append(OpenAIRoutes(config.api, config.agent_ids(), store, gateway))
    return routes
