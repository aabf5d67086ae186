"""The dashboard's door: logging in and out, and the checks every request passes first.

`gate` lets `/static/`, the login page and the paths with credentials of their own
(`/hooks/`, `/v1/`) through; anything else needs the token, as a
`Authorization: Bearer` header or the session cookie the login form sets (`HttpOnly`,
`SameSite=Strict`). A change (any method but GET/HEAD) from a browser session must also come
from the dashboard's own pages (`Origin`, else `Referer`) and carry the session's CSRF token.
Wrong tokens count against the client address and all addresses together (`FailureLimit`);
the token is checked first, so the right one always gets in. After 5 in a minute an address gets
429 until they age out. `secure_headers` gives every response a strict Content-Security-
Policy and its companions.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from bot.web.auth import SESSION_SECONDS, safe_next, same_origin
from bot.web.board import BOARD, COOKIE, Auth, Board, render

log = logging.getLogger(__name__)

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'; object-src 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
READS = ("GET", "HEAD")
# Served beside the dashboard with credentials of their own (a webhook's signature, an API
# token: bot/web/hooks.py, bot/web/openai_api.py); the dashboard's token is not theirs.
OWN_CREDENTIALS = ("/hooks/", "/v1/")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: every response, static files and errors included."""
    response.headers.update(HEADERS)
    if not request.path.startswith("/static/"):
        response.headers["Cache-Control"] = "no-store"


def see_other(location: str) -> web.Response:
    """303: the browser GETs `location` next (after a form, after logging in)."""
    return web.Response(status=303, headers={"Location": location})


def refused(request: web.Request, status: int, why: str) -> web.Response:
    return render(request, "refused.html", {"status": status, "why": why}, status=status)


def too_many(request: web.Request, retry_after: float) -> web.Response:
    response = refused(
        request, 429, f"Too many wrong tokens from {request.remote}; try again in a minute."
    )
    response.headers["Retry-After"] = str(max(int(retry_after + 0.999), 1))
    return response


def _from_here(request: web.Request) -> bool:
    return same_origin(
        request.headers.get("Origin", ""), request.headers.get("Referer", ""), request.host
    )


async def _who(request: web.Request, board: Board) -> Auth | web.StreamResponse:
    """The caller's credentials, or the answer to a caller without valid ones."""
    address = request.remote or ""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, given = header.partition(" ")
        if scheme.lower() == "bearer" and board.credentials.token_ok(given.strip()):
            return Auth("bearer", "bearer")  # the right token is never held back
        wait = board.limit.retry_after(address)
        if wait:
            return too_many(request, wait)
        board.limit.failed(address)
        log.warning("dashboard: a wrong bearer token from %s", address)
        response = refused(request, 401, "That token is not the dashboard's.")
        response.headers["WWW-Authenticate"] = 'Bearer realm="perch"'
        return response
    session = board.credentials.session_id(request.cookies.get(COOKIE, ""))
    if session is not None:
        return Auth("cookie", session)
    if request.method in READS and not request.path.startswith("/logs/stream"):
        raise web.HTTPSeeOther(f"/login?next={quote(request.path_qs, safe='')}")
    return refused(request, 401, "Log in first: this needs the dashboard's token.")


@web.middleware
async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path.startswith(OWN_CREDENTIALS):
        return await handler(request)
    board = request.app[BOARD]
    if request.path.startswith("/static/"):
        return await handler(request)
    if request.path == "/login":
        if request.method not in READS and not _from_here(request):
            return refused(request, 403, "That login form did not come from this dashboard.")
        return await handler(request)
    who = await _who(request, board)
    if not isinstance(who, Auth):
        return who
    if request.method not in READS and who.kind == "cookie":
        if not _from_here(request):
            log.warning(
                "dashboard: refused a %s %s from another origin", request.method, request.path
            )
            return refused(request, 403, "That form did not come from this dashboard.")
        form = await request.post()
        if not board.credentials.csrf_ok(who.session, str(form.get("csrf", ""))):
            log.warning(
                "dashboard: refused a %s %s without its CSRF token", request.method, request.path
            )
            return refused(request, 403, "That form is stale or forged (no valid CSRF token).")
    return await handler(request)


async def login_page(request: web.Request) -> web.StreamResponse:
    return render(request, "login.html", {"next": safe_next(request.query.get("next", "/"))})


async def login(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    address = request.remote or ""
    form = await request.post()
    target = safe_next(str(form.get("next", "/")))
    if not board.credentials.token_ok(str(form.get("token", ""))):
        wait = board.limit.retry_after(address)  # a wrong token only: the right one gets in
        if wait:
            return too_many(request, wait)
        board.limit.failed(address)
        log.warning("dashboard: a wrong token from %s", address)
        context = {"next": target, "error": "That is not the dashboard's token."}
        return render(request, "login.html", context, status=401)
    response = see_other(target)
    response.set_cookie(
        COOKIE,
        board.credentials.new_session(),
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="Strict",
        secure=request.secure,
    )
    log.info("dashboard: logged in from %s", address)
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    """End the session on the server (a copy of its cookie is refused from now on)."""
    board = request.app[BOARD]
    session = board.credentials.session_id(request.cookies.get(COOKIE, ""))
    if session is not None:
        board.credentials.end_session(session)
    response = see_other("/login")
    response.del_cookie(COOKIE, path="/")
    return response
