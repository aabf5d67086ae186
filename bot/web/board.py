"""What the dashboard's handlers work with: the `Board` (the daemon's parts they read, the
credentials, the flashes) and `render`, which fills a page's template with what every page
shows (navigation, the session's CSRF token, the last action's outcome), then passes the
page through the one redactor (`bot/config/redact.py`): no page shows a secret or a URL's
password, whatever a chat or an old tool result holds.

The handlers reach the board through `request.app[BOARD]`; who asked is `board.who(request)`
(the guard, `guard.py`, has let only valid credentials through to them).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import aiohttp_jinja2
from aiohttp import web

from agents.skills.skill import Skill
from bot.config.redact import Redactor
from bot.config.schema import Config
from bot.operator.ops import run_op
from bot.operator.reply import LiveDaemon, OpContext, Reply
from bot.store.roles import Store
from bot.web.auth import Credentials, FailureLimit
from bot.web.logtail import LogTail

MAX_FLASH_SESSIONS = 256
COOKIE = "perch_session"

PAGES = (  # (path, name) in the navigation's order
    ("/", "Overview"),
    ("/sessions", "Sessions"),
    ("/pairing", "Pairing"),
    ("/approvals", "Approvals"),
    ("/cron", "Cron"),
    ("/usage", "Usage"),
    ("/logs", "Logs"),
)


class SkillList(Protocol):
    def skills(self) -> Sequence[Skill]: ...


@dataclass(frozen=True, slots=True)
class Auth:
    """Who is asking: a browser session (`cookie`, with its id) or a bearer token."""

    kind: Literal["cookie", "bearer"]
    session: str


@dataclass(frozen=True, slots=True)
class Flash:
    ok: bool
    text: str


class Flashes:
    """The outcome of a session's last change, shown once on the page it leads to."""

    def __init__(self) -> None:
        self._waiting: OrderedDict[str, list[Flash]] = OrderedDict()

    def add(self, session: str, reply: Reply) -> None:
        text = (reply.out + reply.err).strip() or ("Done." if reply.code == 0 else "Failed.")
        self._waiting.setdefault(session, []).append(Flash(reply.code == 0, text))
        self._waiting.move_to_end(session)
        while len(self._waiting) > MAX_FLASH_SESSIONS:
            self._waiting.popitem(last=False)

    def take(self, session: str) -> list[Flash]:
        return self._waiting.pop(session, [])


@dataclass(slots=True)
class Board:
    config: Config
    store: Store
    live: LiveDaemon
    skills: SkillList
    instance_id: str
    tail: LogTail
    credentials: Credentials
    limit: FailureLimit = field(default_factory=FailureLimit)
    flashes: Flashes = field(default_factory=Flashes)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    redact: Redactor = field(default_factory=Redactor)  # every page passes it

    def who(self, request: web.BaseRequest) -> Auth | None:
        """The request's valid credentials: a bearer token, else a session cookie."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.credentials.token_ok(given.strip()):
            return Auth("bearer", "bearer")
        session = self.credentials.session_id(request.cookies.get(COOKIE, ""))
        return Auth("cookie", session) if session is not None else None

    async def op(self, op: str, args: dict[str, Any]) -> Reply:
        """A control operation, exactly as the control socket runs it."""
        return await run_op(OpContext(self.config, self.store, self.live), op, args)


BOARD = web.AppKey("board", Board)


def render(
    request: web.Request, name: str, context: Mapping[str, Any], *, status: int = 200
) -> web.Response:
    """The page `name` with the navigation, the CSRF token and the flashes added."""
    board = request.app[BOARD]
    auth = board.who(request)
    page: dict[str, Any] = {
        "pages": PAGES,
        "path": request.path,
        "csrf": board.credentials.csrf(auth.session) if auth and auth.kind == "cookie" else "",
        "flashes": board.flashes.take(auth.session) if auth else [],
        "signed_in": auth is not None,
        "agent": board.config.agent.id,
    }
    response = aiohttp_jinja2.render_template(name, request, {**page, **context}, status=status)
    if response.text:  # a password pasted into a chat, an old tool result: never shown
        response.text = board.redact(response.text)
    return response
