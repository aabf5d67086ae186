"""The browser behind the `browser` tool: one headless Chromium, one context per session.

`BrowserPool` starts Playwright and Chromium on first use (the system's `chromium` where
`executable` names it or one is on PATH, else Playwright's own build), gives each session its
own browser context (cookies and storage kept for the session, dropped by `forget` on `/new`),
at most `max_pages` tabs per session, and closes a session's context after `idle_close`
seconds unused and the browser itself once no session uses it. Every request of every page is
routed through `PageFetcher` (see `browser_guard`), service workers are blocked so none can
answer in its place, WebSockets reach public hosts only, and WebRTC sends nothing outside
the proxy rules. Downloads land in the workspace inbox. Chromium runs in its own process
group and, where the host offers cgroups, in a cgroup of its own with `agent.exec`'s memory and
process limits (`browser_jail`); a page that crashes (out of memory, say) leaves its tabs, and
a browser that died is started afresh on the next action, its sessions' contexts with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from agents.tools.base import ToolError
from agents.tools.browser_guard import BrowserAllow, PageFetcher, check_url
from agents.tools.browser_jail import BrowserJail, driver_pids
from agents.tools.cgroups import CgroupHome
from agents.tools.net_guard import FetchRefused
from agents.workspace_files import TakenByLink, create_new

if TYPE_CHECKING:
    from playwright.async_api import (
        Browser,
        BrowserContext,
        Download,
        Page,
        Playwright,
        Route,
        WebSocketRoute,
    )

log = logging.getLogger(__name__)

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 10

# Flags that keep Chromium off the network by itself (this is a closed machine for it too) and
# keep WebRTC from reaching around the routing.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--dns-prefetch-disable",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)


@dataclass(frozen=True, slots=True)
class BrowserSettings:
    """`agent.browser` as the pool needs it."""

    executable: str | None = None
    headless: bool = True
    allow_private: tuple[str, ...] = ()
    max_pages: int = 5
    timeout: float = 30.0
    idle_close: float = 300.0
    max_bytes: int = 20_000_000
    memory_bytes: int = 0  # the browser's cgroup limits (agent.exec's; 0: none)
    processes: int = 0


@dataclass
class SessionBrowser:
    """One session's context, its tabs in order, which one is current, and its last use."""

    context: BrowserContext
    workspace: Path
    pages: list[Page] = field(default_factory=list)
    current: int = 0
    used: float = field(default_factory=time.monotonic)
    downloads: list[str] = field(default_factory=list)

    def page(self) -> Page:
        if not self.pages:
            raise ToolError("no page is open: use action 'open' with a url first")
        return self.pages[min(self.current, len(self.pages) - 1)]


def find_chromium(executable: str | None) -> str | None:
    """The Chromium to drive: the configured one, else the system's, else None (Playwright's)."""
    if executable:
        return executable
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserPool:
    """Lazily started; `session(key)` for a context, `forget(key)`, `aclose()` at the end."""

    def __init__(self, settings: BrowserSettings, cgroups: CgroupHome | None = None) -> None:
        self.settings = settings
        self.jail = BrowserJail(cgroups, settings.memory_bytes, settings.processes)
        self._driver: int | None = None
        self.allow = BrowserAllow.parse(settings.allow_private)
        self._fetcher = PageFetcher(
            self.allow, max_bytes=settings.max_bytes, timeout=settings.timeout
        )
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._sessions: dict[str, SessionBrowser] = {}
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None

    async def _start(self) -> Browser:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        if self._browser is not None:  # it died (killed at its memory limit, say)
            log.warning("browser: Chromium is gone (%s); starting it again", self._why_gone())
            self._browser = None
            self._sessions.clear()  # their contexts died with it
            await self.jail.close()
        from playwright.async_api import async_playwright

        if self._playwright is None:
            before = await asyncio.to_thread(driver_pids)
            self._playwright = await async_playwright().start()
            self._fetcher.open()
            started = await asyncio.to_thread(driver_pids) - before
            self._driver = min(started) if len(started) == 1 else None
        path = find_chromium(self.settings.executable)
        try:
            async with self.jail.launching(self._driver):
                self._browser = await self._playwright.chromium.launch(
                    executable_path=path,
                    headless=self.settings.headless,
                    args=list(CHROMIUM_ARGS),
                    timeout=self.settings.timeout * 1000,
                )
        except Exception as exc:
            await self.jail.close()
            raise ToolError(
                f"the browser did not start ({' '.join(str(exc).split())[:300]}); set "
                "agent.browser.executable to a Chromium binary"
            ) from None
        log.info(
            "browser started: %s, in %s", path or "Playwright's Chromium", self.jail.describe()
        )
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._close_idle())
        return self._browser

    async def session(self, key: str, workspace: Path) -> SessionBrowser:
        async with self._lock:
            found = self._sessions.get(key)
            if found is not None:
                found.used = time.monotonic()
                return found
            browser = await self._start()
            context = await browser.new_context(
                accept_downloads=True, service_workers="block", java_script_enabled=True
            )
            context.set_default_timeout(self.settings.timeout * 1000)
            await context.route("**/*", self._route)
            await context.route_web_socket("**/*", self._web_socket)
            made = SessionBrowser(context, workspace)
            context.on("page", lambda page: self._adopt(key, made, page))
            self._sessions[key] = made
            return made

    def _adopt(self, key: str, session: SessionBrowser, page: Page) -> None:
        """A page the site opened itself (a popup) counts against the session's tabs."""
        if page in session.pages:
            return
        if len(session.pages) >= self.settings.max_pages:
            asyncio.get_running_loop().create_task(page.close())
            return
        session.pages.append(page)
        page.on("download", lambda download: self._on_download(key, session, download))
        page.on("crash", lambda crashed: self._on_crash(session, crashed))

    def _on_crash(self, session: SessionBrowser, page: Page) -> None:
        """A crashed tab answers nothing more: it leaves the session's tabs."""
        log.warning("browser: a page crashed (%s)", self._why_gone())
        if page in session.pages:
            session.pages.remove(page)
            session.current = max(0, min(session.current, len(session.pages) - 1))

    def limit_counts(self) -> tuple[int, int]:
        """The browser's cgroup's counts of memory and process limits met so far."""
        return self.jail.limit_counts()

    def limit_hit_since(self, before: tuple[int, int]) -> str | None:
        """A sentence for the model when the browser met a limit of its cgroup since the
        counts were `before` (an action's start), else None."""
        memory, processes = self.jail.limit_counts()
        if memory > before[0]:
            return f"out of memory: agent.exec.memory_mb is {self.settings.memory_bytes // 2**20}"
        if processes > before[1]:
            return f"out of processes: agent.exec.max_processes is {self.settings.processes}"
        return None

    def _why_gone(self) -> str:
        return self.limit_hit_since((0, 0)) or "no limit of Perch's was met"

    async def new_page(self, key: str, session: SessionBrowser) -> Page:
        if len(session.pages) >= self.settings.max_pages:
            raise ToolError(
                f"{self.settings.max_pages} tabs are open (agent.browser.max_pages); close one "
                "with action 'close' first"
            )
        page = await session.context.new_page()
        self._adopt(key, session, page)
        session.current = session.pages.index(page)
        return page

    def _on_download(self, key: str, session: SessionBrowser, download: Download) -> None:
        asyncio.get_running_loop().create_task(self._save_download(key, session, download))

    async def _save_download(self, key: str, session: SessionBrowser, download: Download) -> None:
        try:
            path = await download.path()
            data = await asyncio.to_thread(path.read_bytes) if path is not None else b""
            if len(data) > self.settings.max_bytes:
                log.info("browser: a download over %d bytes was dropped", self.settings.max_bytes)
                return
            where = await asyncio.to_thread(
                save_download, session.workspace, download.suggested_filename, data
            )
            session.downloads.append(where)
        except Exception as exc:
            log.warning("browser: a download failed: %s", exc)

    async def _route(self, route: Route) -> None:
        """Fetch what the page asked for under the guard, then hand it to the page. A redirect
        is never handed over as one (Chromium would follow it outside the routing): each hop
        is checked and followed here, and a navigation gets a page that navigates on, so the
        next hop comes back through this road too."""
        request = route.request
        try:
            headers = await request.all_headers()
            url, method, body = request.url, request.method, request.post_data_buffer
            fetched = await self._fetcher.fetch(method, url, headers, body)
            for _ in range(_MAX_REDIRECTS):
                location = fetched.headers.get("Location") or fetched.headers.get("location")
                if fetched.status not in _REDIRECTS or not location:
                    break
                url = urljoin(url, location)
                await check_url(url, self.allow)
                if request.is_navigation_request():
                    await route.fulfill(**navigate_on(url, fetched.headers))
                    return
                if fetched.status in (301, 302, 303):
                    method, body = "GET", None
                fetched = await self._fetcher.fetch(method, url, headers, body)
        except FetchRefused as exc:
            log.info("browser: %s", exc)
            await route.abort("blockedbyclient")
            return
        except ToolError as exc:
            log.info("browser: %s", exc)
            await route.abort("failed")
            return
        await route.fulfill(status=fetched.status, headers=fetched.headers, body=fetched.body)

    async def _web_socket(self, ws: WebSocketRoute) -> None:
        try:
            await check_url(ws.url, self.allow)
        except ToolError as exc:
            log.info("browser: websocket %s", exc)
            await ws.close(code=1008, reason="refused")
            return
        ws.connect_to_server()

    async def forget(self, key: str) -> None:
        """Drop a session's context: its cookies, storage and tabs (on `/new`)."""
        async with self._lock:
            found = self._sessions.pop(key, None)
        if found is not None:
            with contextlib.suppress(Exception):
                await found.context.close()

    async def _close_idle(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, max(self.settings.idle_close / 4, 0.05)))
            now = time.monotonic()
            stale = [
                k for k, s in self._sessions.items() if now - s.used > self.settings.idle_close
            ]
            for key in stale:
                await self.forget(key)
            if not self._sessions and self._browser is not None:
                async with self._lock:
                    if not self._sessions and self._browser is not None:
                        browser, self._browser = self._browser, None
                        with contextlib.suppress(Exception):
                            await browser.close()
                        await self.jail.close()
                        log.info("browser closed: idle")

    def open_sessions(self) -> int:
        return len(self._sessions)

    def running(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for key in list(self._sessions):
            await self.forget(key)
        if self._browser is not None:
            with contextlib.suppress(Exception):
                await self._browser.close()
            self._browser = None
        await self.jail.close()
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None
        await self._fetcher.close()


def navigate_on(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """A page that goes on to `url` at once (keeping the cookies the redirect set), in place
    of a redirect the browser would follow unrouted."""
    target = html.escape(url, quote=True)
    page = (
        f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">'
        f"<script>location.replace({json.dumps(url)})</script>"
    )
    kept = {"Content-Type": "text/html; charset=utf-8"}
    if "Set-Cookie" in headers:
        kept["Set-Cookie"] = headers["Set-Cookie"]
    return {"status": 200, "headers": kept, "body": page}


def save_download(workspace: Path, name: str, data: bytes) -> str:
    """Save a download in the workspace inbox (`inbox/<date>/<name>`, a new name if taken)."""
    base = re.sub(r"[^\w.\- ]", "_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    base = base[:120] or "download"
    folder = ("inbox", time.strftime("%Y-%m-%d"))
    stem, dot, suffix = base.rpartition(".")
    for n in range(1, 1000):
        candidate = base if n == 1 else (f"{stem}-{n}.{suffix}" if dot else f"{base}-{n}")
        with contextlib.suppress(TakenByLink):
            if create_new(workspace, (*folder, candidate), data):
                return "/".join((*folder, candidate))
    raise ToolError(f"no free name for the download {base!r} in the inbox today")


def describe_launch(settings: BrowserSettings) -> dict[str, Any]:
    """What doctor reports about which browser would start."""
    return {"executable": find_chromium(settings.executable) or "Playwright's Chromium"}
