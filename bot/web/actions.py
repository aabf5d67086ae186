"""What the dashboard changes, each through the control operation the CLI uses (`run_op`):
stop a session's run (`session.stop`, the chat's `/stop`), approve, deny or revoke pairing
(`pairing.*`), add or remove a cron job (`cron.add`, `cron.rm`).

A handler reads its form (the guard has checked the origin and the CSRF token already),
runs the operation, keeps its answer (the CLI's words) as the session's flash and sends the
browser back to the page it came from (303, so a reload never repeats the change).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from bot.web.board import BOARD
from bot.web.guard import see_other

BACK = {"overview": "/", "sessions": "/sessions"}


async def _act(request: web.Request, op: str, args: dict[str, Any], back: str) -> web.Response:
    board = request.app[BOARD]
    auth = board.who(request)
    reply = await board.op(op, args)
    if auth is not None:  # always, past the guard
        board.flashes.add(auth.session, reply)
    return see_other(back)


async def _form(request: web.Request) -> dict[str, str]:
    form = await request.post()
    return {name: value for name, value in form.items() if isinstance(value, str)}


def _back(form: dict[str, str], default: str) -> str:
    """A page of this dashboard to return to (a session's page keeps its key)."""
    back = form.get("back", "")
    if back == "session":
        return "/sessions/view?key=" + quote(form.get("session", ""), safe="")
    return BACK.get(back, default)


async def stop_run(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    args = {"session": form.get("session", ""), "all": form.get("all") == "1"}
    return await _act(request, "session.stop", args, _back(form, "/"))


async def pairing_approve(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    args = {"channel": form.get("channel", ""), "code": form.get("code", "")}
    return await _act(request, "pairing.approve", args, "/pairing")


async def pairing_deny(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    args = {"channel": form.get("channel", ""), "code": form.get("code", "")}
    return await _act(request, "pairing.deny", args, "/pairing")


async def pairing_revoke(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    args = {"channel": form.get("channel", ""), "sender": form.get("sender", "")}
    return await _act(request, "pairing.revoke", args, "/pairing")


async def cron_add(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    kind = form.get("kind", "")
    args = {
        "kind": kind if kind in ("at", "every", "cron") else "",
        "expr": form.get("expr", "").strip(),
        "message": form.get("message", ""),
        "tz": form.get("tz", "").strip() or None,
        "name": form.get("name", "").strip(),
        "session": "chat" if form.get("session") == "chat" else "isolated",
        "to": form.get("to", "").strip() or "owner",
        "allow_fast": form.get("allow_fast") == "on",
    }
    return await _act(request, "cron.add", args, "/cron")


async def cron_remove(request: web.Request) -> web.StreamResponse:
    form = await _form(request)
    return await _act(request, "cron.rm", {"ids": [form.get("id", "")]}, "/cron")
