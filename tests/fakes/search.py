"""A fake search API on 127.0.0.1 speaking Brave's, SearXNG's and Tavily's wire formats.

- Brave: `GET /res/v1/web/search?q=&count=` with `X-Subscription-Token`; answers
  `{"type": "search", "web": {"results": [{title, url, description}]}}`, at most `count`.
- SearXNG: `GET /search?q=&format=json`; answers `{"query", "results": [{title, url, content,
  engine}]}` (no count parameter); `format=json` refused with 403 unless `searxng_json`.
- Tavily: `POST /search` with `Authorization: Bearer` and `{query, max_results}`; answers
  `{"query", "results": [{title, url, content, score}]}`.
Every request is recorded. `status` (with `extra_headers`) makes every answer that status;
`raw` answers those bytes as text/html; `hold` makes answers wait for that event; `/page`
stands for a result's own page, so a test can see that nobody fetched it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import web


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any = None


@dataclass
class FakeSearch:
    brave_key: str = "brave-key"
    tavily_key: str = "tvly-key"
    searxng_json: bool = True
    results: list[dict[str, str]] = field(default_factory=list)
    status: int | None = None
    extra_headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    hold: asyncio.Event | None = None
    seen: list[Seen] = field(default_factory=list)
    base_url: str = ""
    _runner: web.AppRunner | None = None

    async def __aenter__(self) -> FakeSearch:
        app = web.Application()
        app.router.add_get("/res/v1/web/search", self._brave)
        app.router.add_get("/search", self._searxng)
        app.router.add_post("/search", self._tavily)
        app.router.add_get("/page", self._page)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def hits(self, n: int, url: str = "") -> None:
        """`n` results whose URLs point at this fake's /page (or `url`)."""
        target = url or f"{self.base_url}/page"
        self.results = [
            {"title": f"Result {i}", "url": f"{target}?n={i}", "snippet": f"Snippet {i}."}
            for i in range(1, n + 1)
        ]

    async def _record(self, request: web.Request) -> web.Response | None:
        body = await request.json() if request.method == "POST" and request.can_read_body else None
        self.seen.append(
            Seen(request.method, request.path, dict(request.query), dict(request.headers), body)
        )
        if self.hold is not None:
            await self.hold.wait()
        if self.raw is not None:
            return web.Response(body=self.raw, content_type="text/html")
        if self.status is not None:
            return web.json_response(
                {"error": "scripted"}, status=self.status, headers=self.extra_headers
            )
        return None

    async def _brave(self, request: web.Request) -> web.Response:
        if (early := await self._record(request)) is not None:
            return early
        if request.headers.get("X-Subscription-Token") != self.brave_key:
            return web.json_response(
                {"type": "ErrorResponse", "error": {"status": 401}}, status=401
            )
        count = int(request.query.get("count", "20"))
        found = [
            {"title": r["title"], "url": r["url"], "description": r["snippet"], "age": "1 day"}
            for r in self.results[:count]
        ]
        return web.json_response({"type": "search", "web": {"type": "search", "results": found}})

    async def _searxng(self, request: web.Request) -> web.Response:
        if (early := await self._record(request)) is not None:
            return early
        if request.query.get("format") == "json" and not self.searxng_json:
            return web.Response(status=403, text="403 Forbidden")
        found = [
            {"title": r["title"], "url": r["url"], "content": r["snippet"], "engine": "fake"}
            for r in self.results
        ]
        return web.json_response({"query": request.query.get("q"), "results": found})

    async def _tavily(self, request: web.Request) -> web.Response:
        if (early := await self._record(request)) is not None:
            return early
        if request.headers.get("Authorization") != f"Bearer {self.tavily_key}":
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        body = self.seen[-1].body or {}
        found = [
            {"title": r["title"], "url": r["url"], "content": r["snippet"], "score": 0.9}
            for r in self.results[: int(body.get("max_results", 5))]
        ]
        return web.json_response({"query": body.get("query"), "results": found})

    async def _page(self, request: web.Request) -> web.Response:
        self.seen.append(Seen(request.method, request.path, dict(request.query), {}))
        return web.Response(text="a result page")
