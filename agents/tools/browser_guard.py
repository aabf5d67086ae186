"""The browser's SSRF guard: every request a page makes is fetched by Perch, not by Chromium.

`BrowserAllow` is `agent.browser.allow_private`: host names, `host:port` pairs, IP addresses and
CIDR ranges that may be reached even though they are not public. `PageFetcher` is the one
road out of the browser: the page's every request (documents, scripts, images, XHR/fetch,
redirect hops) is routed here by `BrowserPool`, fetched with aiohttp through a resolver that
checks each address of the host (`net_guard.resolve_checked`, the rules `web_fetch` keeps)
and connects to exactly the addresses it checked, then handed back to the page
(`route.fulfill`). So a DNS answer that changes between the check and the connection
(rebinding) cannot steer the page to a private address, and a page's scripts reach nothing
the model could not fetch itself. Redirects are not followed here: the browser follows them,
and each hop comes back through the guard. WebSockets are allowed to public hosts only.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp

from agents.tools.base import ToolError
from agents.tools.net_guard import AllowList, FetchRefused, GuardedResolver, resolve_checked

# Hop-by-hop headers and what aiohttp sets itself; never copied between the two sides.
_DROPPED = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade",
     "proxy-connection", "te", "trailer", "content-encoding"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BrowserAllow:
    """Where a page may go although it is not public: `hosts` (any port), `ports` (host or
    address with one port), `networks` (CIDR ranges and single addresses, any port)."""

    anywhere: AllowList
    ports: frozenset[tuple[str, int]]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> BrowserAllow:
        plain: list[str] = []
        ports: set[tuple[str, int]] = set()
        for raw in entries:
            entry = raw.strip().lower()
            host, _, port = entry.rpartition(":")
            if (
                host
                and port.isdigit()
                and "/" not in entry
                and (entry.count(":") == 1 or host.endswith("]"))
            ):
                ports.add((host.strip("[]"), int(port)))
            else:
                plain.append(entry)
        return cls(AllowList.parse(plain), frozenset(ports))

    def for_port(self, port: int) -> AllowList:
        """The allow-list that holds for connections to `port`."""
        extra = [host for host, allowed in self.ports if allowed == port]
        if not extra:
            return self.anywhere
        more = AllowList.parse(extra)
        return AllowList(
            self.anywhere.hosts | more.hosts,
            self.anywhere.suffixes + more.suffixes,
            self.anywhere.networks + more.networks,
        )


def target(url: str) -> tuple[str, int]:
    """The host and port a URL connects to; ToolError for what a page may not load."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
        raise FetchRefused(f"the browser only loads http(s) addresses, not {url[:80]!r}")
    try:
        port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
    except ValueError:
        raise FetchRefused(f"invalid port in {url[:80]!r}") from None
    return parts.hostname, port


async def check_url(url: str, allow: BrowserAllow) -> None:
    """FetchRefused unless every address of the URL's host may be reached."""
    host, port = target(url)
    await resolve_checked(host, port, allow.for_port(port))


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    headers: dict[str, str]
    body: bytes


class PageFetcher:
    """Fetches what pages ask for, under the guard; `open()` before, `close()` after."""

    def __init__(self, allow: BrowserAllow, *, max_bytes: int, timeout: float) -> None:
        self._allow = allow
        self._max_bytes = max_bytes
        self._timeout = timeout
        self._http: aiohttp.ClientSession | None = None

    def open(self) -> None:
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(self._allow), limit=16)
        self._http = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # the browser keeps the cookies
            auto_decompress=True,
            trust_env=False,
        )

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def fetch(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes | None
    ) -> Fetched:
        """One request as the page made it; FetchRefused for a refused address, ToolError
        when the answer is larger than allowed or none came."""
        host, _ = target(url)
        if _is_ip_literal(host):
            await check_url(url, self._allow)  # aiohttp connects to a literal unresolved
        if self._http is None:
            raise ToolError("the browser is closed")
        sent = {
            k: v for k, v in headers.items() if k.lower() not in _DROPPED and not k.startswith(":")
        }
        try:
            async with self._http.request(
                method,
                url,
                headers=sent,
                data=body,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                max_line_size=16384,
                max_field_size=16384,
            ) as response:
                data = await response.content.read(self._max_bytes + 1)
                if len(data) > self._max_bytes:
                    raise ToolError(f"{url[:80]} is larger than {self._max_bytes} bytes")
                kept = {k: v for k, v in response.headers.items() if k.lower() not in _DROPPED}
                cookies = response.headers.getall("Set-Cookie", [])
                if cookies:
                    kept["Set-Cookie"] = "\n".join(cookies)
                return Fetched(response.status, kept, data)
        except (aiohttp.ClientError, TimeoutError) as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, FetchRefused) else None
            if cause is not None:
                raise cause from None
            raise ToolError(f"{url[:80]}: {str(exc) or type(exc).__name__}") from None


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host.replace(".", "").isdigit()  # 2130706433 and other numeric forms
    return True
