"""`WebServer`: the dashboard on `web.listen`, an aiohttp app of its own, while the daemon runs.

Its templates (Jinja2, autoescaped) and static files (CSS, one small script, the icon) are
package data beside this module, so an installed Perch serves them as a checkout does. The
token is `web.token`; without one (allowed on a loopback listen only) the dashboard still
needs one: it is generated once and kept in the state directory as `web.token` (mode 0600,
reused across restarts), and the log says where, never what. `start()` also begins keeping
the last log lines for the Logs page.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp_jinja2
import jinja2
from aiohttp import web

from bot.config.observe import split_listen
from bot.config.redact import Redactor
from bot.config.schema import Config
from bot.config.web import MIN_TOKEN_CHARS, WebConfig
from bot.operator.reply import LiveDaemon
from bot.store.roles import Store
from bot.web import actions, pages
from bot.web.auth import Credentials
from bot.web.board import BOARD, Board, SkillList
from bot.web.guard import gate, login, login_page, logout, secure_headers
from bot.web.logtail import LogTail

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
TOKEN_NAME = "web.token"
MAX_BODY = 256 * 1024  # a form is small; a larger request body is refused (413)


def token_path(config: Config) -> Path:
    """Where a generated dashboard token is kept: the state directory, by the database."""
    return config.db_path.with_name(TOKEN_NAME)


def generated_token(path: Path) -> str:
    """The token kept at `path`, made (mode 0600) when there is none or it is not private."""
    try:
        if path.stat().st_mode & 0o077 == 0:
            kept = path.read_text(encoding="utf-8").strip()
            if len(kept) >= MIN_TOKEN_CHARS:
                return kept
    except OSError:
        pass
    token = secrets.token_urlsafe(24)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    os.replace(temporary, path)
    return token


class Routes(Protocol):
    """Handlers served beside the dashboard (webhooks, the OpenAI-compatible API)."""

    def install(self, app: web.Application) -> None: ...


def make_app(board: Board | None, routes: Sequence[Routes] = ()) -> web.Application:
    """The dashboard's app (`board`; None: the dashboard is off) with `routes` added."""
    if board is None:
        bare = web.Application(client_max_size=MAX_BODY)
        bare.on_response_prepare.append(secure_headers)
        for each in routes:
            each.install(bare)
        return bare
    app = web.Application(middlewares=[gate], client_max_size=MAX_BODY)
    app[BOARD] = board
    aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        default_helpers=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    app.on_response_prepare.append(secure_headers)
    add = app.router
    add.add_get("/login", login_page)
    add.add_post("/login", login)
    add.add_post("/logout", logout)
    add.add_get("/", pages.overview)
    add.add_get("/sessions", pages.sessions)
    add.add_get("/sessions/view", pages.session_view)
    add.add_get("/pairing", pages.pairing)
    add.add_get("/approvals", pages.approvals)
    add.add_get("/cron", pages.cron)
    add.add_get("/usage", pages.usage)
    add.add_get("/logs", pages.logs)
    add.add_get("/logs/stream", pages.log_stream)
    add.add_post("/runs/stop", actions.stop_run)
    add.add_post("/pairing/approve", actions.pairing_approve)
    add.add_post("/pairing/deny", actions.pairing_deny)
    add.add_post("/pairing/revoke", actions.pairing_revoke)
    add.add_post("/cron/add", actions.cron_add)
    add.add_post("/cron/remove", actions.cron_remove)
    add.add_static("/static", HERE / "static", show_index=False, follow_symlinks=False)
    for each in routes:
        each.install(app)
    return app


class DashboardAddress:
    """Where the dashboard listens (`web.listen`; a port 0 becomes the one bound). Made before
    both the daemon's status, which reports it, and the server, which binds it."""

    def __init__(self, listen: str, *, dashboard: bool = True) -> None:
        self.host, self.port = split_listen(listen)
        self.dashboard = dashboard  # False: the server runs for webhooks or the API alone

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def status(self) -> dict[str, Any]:
        return {"dashboard" if self.dashboard else "web_server": self.url}


class WebServer:
    """Serves one daemon's dashboard at `address` (`config.web`)."""

    def __init__(
        self,
        address: DashboardAddress,
        config: Config,
        store: Store,
        live: LiveDaemon,
        skills: SkillList,
        instance_id: str,
        *,
        dashboard: bool = True,  # False: only `routes` (web.enabled off, hooks or api on)
        routes: Sequence[Routes] = (),
    ) -> None:
        self.address = address
        self.dashboard = dashboard
        self.routes = tuple(routes)
        self.settings: WebConfig = config.web
        self.config = config
        self.store = store
        self.live = live
        self.skills = skills
        self.instance_id = instance_id
        self.tail = LogTail(config.secret_values())
        self._board: Board | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return self.address.url

    async def start(self) -> None:
        """Listen (raises OSError, e.g. when the port is taken)."""
        if not self.dashboard:
            await self._serve(make_app(None, self.routes))
            log.info("web server at %s (webhooks and API only; the dashboard is off)", self.url)
            return
        if self.settings.token:
            token, where = self.settings.token, "web.token"
        else:
            path = token_path(self.config)
            token, where = generated_token(path), f"the token in {path}"
        self._board = board = Board(
            self.config,
            self.store,
            self.live,
            self.skills,
            self.instance_id,
            self.tail,
            Credentials(token),
            redact=Redactor(self.config.secret_values()),
        )
        await self._serve(make_app(board, self.routes))
        self.tail.attach()
        log.info("dashboard at %s (log in with %s)", self.url, where)

    async def _serve(self, app: web.Application) -> None:
        address = self.address
        family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        sock = socket.create_server((address.host, address.port), family=family)
        address.port = sock.getsockname()[1]  # `listen: host:0` picks a free port
        # A client that goes away cancels its handler (an API request stops its run).
        runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, handler_cancellation=True
        )
        await runner.setup()
        try:
            await web.SockSite(runner, sock).start()
        except BaseException:
            sock.close()
            await runner.cleanup()
            raise
        self._runner = runner

    async def stop(self) -> None:
        self.tail.detach()
        if self._board is not None:
            self._board.closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
