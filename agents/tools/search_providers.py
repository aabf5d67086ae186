"""The search APIs `web_search` can ask, each one request shape and one answer shape.

- `brave`: the Brave Search API, `GET {base}/res/v1/web/search?q=...&count=...` with the key in
  `X-Subscription-Token`; results in `web.results[]` (`title`, `url`, `description`).
- `searxng`: a self-hosted SearXNG instance's JSON API, `GET {base}/search?q=...&format=json`
  (json must be in its `search.formats`); results in `results[]` (`title`, `url`, `content`);
  it has no count parameter, so the list is cut here.
- `tavily`: the Tavily Search API, `POST {base}/search` with a JSON body `{query, max_results}`
  and `Authorization: Bearer <key>`; results in `results[]` (`title`, `url`, `content`). The
  third provider because it is one request with a free tier, shaped for agents (clean
  snippets), and the one nanobot users already hold keys for.
Nothing here does I/O: `web_search.py` sends what `request` builds and reads with `hits`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Hit:
    """One result as the provider sent it (not yet cleaned)."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True, slots=True)
class SearchRequest:
    method: str
    url: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    default_base: str  # "" where there is no public one
    needs_key: bool
    request: Callable[[str, int, str, str], SearchRequest]  # (query, count, key, base)
    hits: Callable[[object], list[Hit]]


def _brave_request(query: str, count: int, key: str, base: str) -> SearchRequest:
    return SearchRequest(
        "GET",
        f"{base}/res/v1/web/search",
        params={"q": query, "count": str(count)},
        headers={"Accept": "application/json", "X-Subscription-Token": key},
    )


def _searxng_request(query: str, count: int, key: str, base: str) -> SearchRequest:
    return SearchRequest(
        "GET",
        f"{base}/search",
        params={"q": query, "format": "json"},
        headers={"Accept": "application/json"},
    )


def _tavily_request(query: str, count: int, key: str, base: str) -> SearchRequest:
    return SearchRequest(
        "POST",
        f"{base}/search",
        headers={"Accept": "application/json", "Authorization": f"Bearer {key}"},
        body={"query": query, "max_results": count},
    )


def _brave_hits(payload: object) -> list[Hit]:
    web = payload.get("web") if isinstance(payload, Mapping) else None
    return _collect(web.get("results") if isinstance(web, Mapping) else None, "description")


def _results_hits(payload: object) -> list[Hit]:
    found = payload.get("results") if isinstance(payload, Mapping) else None
    return _collect(found, "content")


def _collect(results: object, snippet_key: str) -> list[Hit]:
    if not isinstance(results, list):
        return []
    hits = []
    for item in results:
        if not isinstance(item, Mapping):
            continue
        url, title, snippet = item.get("url"), item.get("title"), item.get(snippet_key)
        if isinstance(url, str) and url:
            hits.append(
                Hit(
                    title if isinstance(title, str) else "",
                    url,
                    snippet if isinstance(snippet, str) else "",
                )
            )
    return hits


PROVIDERS: dict[str, Provider] = {
    "brave": Provider("brave", "https://api.search.brave.com", True, _brave_request, _brave_hits),
    "searxng": Provider("searxng", "", False, _searxng_request, _results_hits),
    "tavily": Provider("tavily", "https://api.tavily.com", True, _tavily_request, _results_hits),
}
