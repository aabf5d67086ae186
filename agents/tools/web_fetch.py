"""`web_fetch {url, max_chars?}`: fetch a public http(s) page and return it as readable text.

Owns the SSRF guard. Every TCP connection (the first request and each redirect hop, followed
manually) goes through `_GuardedBackend.connect_tcp`, which resolves the host once, refuses
loopback, private, CGNAT, link-local (cloud metadata), unspecified, multicast and reserved
addresses (also when embedded in IPv4-mapped, 6to4 or NAT64 IPv6 addresses) unless the host or
address is allow-listed, and then connects to exactly the address it checked: a DNS answer that
changes between check and connect (rebinding) cannot redirect the socket. TLS still verifies the
certificate against the URL's host name. Residual risks, stated plainly: no proxy is used
(`trust_env=False`), so deployments that must egress through a proxy cannot use this tool; a
public host may itself relay to private services (an open redirector is handled, an open proxy
is not); and an allow-listed host name is trusted whatever it resolves to.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import re
import socket
import ssl
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx

from agents.tools.base import ToolContext, ToolError, ToolResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_USER_AGENT = "Perch/0.1 (personal assistant; web_fetch)"
DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 200_000

_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class FetchRefused(ToolError):
    """The target is not reachable under the SSRF policy; raised before any connection."""


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` must not be fetched ("loopback", "private", ...), or None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is None and ip.teredo is not None:
            embedded = ip.teredo[1]
        if embedded is not None:
            inner = address_problem(embedded)
            if inner is not None:
                return f"{inner} (embedded in {ip})"
            if ip.ipv4_mapped is not None or ip in _NAT64:
                return None
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (includes cloud metadata endpoints)"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "carrier-grade NAT (100.64.0.0/10)"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-global"
    return None


@dataclass(frozen=True, slots=True)
class AllowList:
    """Host names (exact, or `*.example.com` for subdomains), IP addresses and CIDR networks
    that may be fetched even though they resolve to non-public addresses."""

    hosts: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        hosts: set[str] = set()
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower().rstrip(".")
            if entry.startswith("[") and entry.endswith("]"):
                entry = entry[1:-1]
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if entry.startswith("*."):
                suffixes.append(entry[1:])
            else:
                hosts.add(entry)
        return cls(frozenset(hosts), tuple(suffixes), tuple(networks))

    def allows_host(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.hosts or any(name.endswith(s) for s in self.suffixes)

    def allows_address(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.networks)


async def resolve_checked(host: str, port: int, allow: AllowList) -> list[str]:
    """The addresses of `host` if every one may be fetched, else FetchRefused.

    IP literals (any form the C resolver accepts numerically, such as `2130706433`) are
    parsed without DNS; names are resolved with the event loop's getaddrinfo.
    """
    name = host.lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            name, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )
    except socket.gaierror:
        try:
            infos = await loop.getaddrinfo(name, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ToolError(f"cannot resolve host {host!r} ({exc.strerror})") from None
    addresses: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise ToolError(f"cannot resolve host {host!r} (no addresses)")
    if not allow.allows_host(name):
        for ip in addresses:
            problem = address_problem(ip)
            if problem is not None and not allow.allows_address(ip):
                shown = host if str(ip) == name else f"{host} (resolves to {ip})"
                raise FetchRefused(
                    f"refused to fetch {shown}: a {problem} address. web_fetch only reaches "
                    "public internet hosts; the owner can add this host to the web_fetch "
                    "allow_hosts setting if it is meant to be reachable"
                )
    return [str(ip) for ip in addresses]


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves, checks and connects to the checked address, for every connection httpcore opens."""

    def __init__(self, allow: AllowList) -> None:
        self._allow = allow
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve_checked(host, port, self._allow)
        error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise FetchRefused("web_fetch never connects to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _as_httpx_error(exc: Exception) -> httpx.TransportError:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, httpcore.TimeoutException):
        return httpx.TimeoutException(message)
    return httpx.TransportError(message)


_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.UnsupportedProtocol,
    httpcore.ConnectionNotAvailable,
)


class _GuardedStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except _HTTPCORE_ERRORS as exc:
            raise _as_httpx_error(exc) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


class _GuardedTransport(httpx.AsyncBaseTransport):
    """httpx transport over an httpcore pool whose every connection is checked."""

    def __init__(self, allow: AllowList, ssl_context: ssl.SSLContext) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=4,
            keepalive_expiry=5.0,
            network_backend=_GuardedBackend(allow),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except _HTTPCORE_ERRORS as exc:
            raise _as_httpx_error(exc) from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_GuardedStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


_SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "nav", "iframe", "object", "canvas"}
)
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "table",
        "tr",
        "pre",
        "blockquote",
        "figure",
        "figcaption",
        "form",
        "hr",
        "address",
        "details",
        "summary",
        "body",
        "html",
        "fieldset",
        "caption",
    }
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_RUNS = re.compile(r"\n{3,}")


class _TextExtractor(HTMLParser):
    """Readable text from HTML: headings as `#`, list items as `-`, links as `text (url)`."""

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.title_parts: list[str] = []
        self._out: list[str] = []
        self._skip = 0
        self._in_title = False
        self._pre = 0
        self._links: list[tuple[str | None, int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif self._skip:
            return
        elif tag in _HEADINGS:
            self._out.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self._out.append("\n- ")
        elif tag == "br":
            self._out.append("\n")
        elif tag in ("td", "th"):
            self._out.append(" ")
        elif tag == "a":
            href = dict(attrs).get("href")
            self._links.append((href, len(self._out)))
        elif tag in _BLOCK_TAGS:
            self._out.append("\n\n" if tag in ("p", "pre", "blockquote", "table") else "\n")
            if tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif self._skip:
            return
        elif tag in _HEADINGS:
            self._out.append("\n\n")
        elif tag == "a" and self._links:
            href, start = self._links.pop()
            self._close_link(href, start)
        elif tag in _BLOCK_TAGS:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            self._out.append("\n\n" if tag in ("p", "pre", "blockquote", "table") else "\n")

    def _close_link(self, href: str | None, start: int) -> None:
        if not href or href.startswith("#"):
            return
        target = urljoin(self.base_url, href.strip())
        if not target.startswith(("http://", "https://")):
            return
        text = " ".join("".join(self._out[start:]).split())
        if text and text != target:
            self._out.append(f" ({target})")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif self._skip:
            return
        elif self._pre:
            self._out.append(data.replace("\n", "\x00"))
        else:
            self._out.append(re.sub(r"\s+", " ", data))

    @property
    def title(self) -> str:
        return " ".join("".join(self.title_parts).split())

    def text(self) -> str:
        lines = []
        for line in "".join(self._out).split("\n"):
            if "\x00" in line:
                lines.extend(line.split("\x00"))
            else:
                lines.append(_SPACES.sub(" ", line).strip())
        return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, base_url: str = "") -> tuple[str, str]:
    """(title, readable text) of an HTML document; scripts, styles and navigation dropped."""
    parser = _TextExtractor(base_url)
    parser.feed(html)
    parser.close()
    return parser.title, parser.text()


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-yaml",
        "application/yaml",
        "application/ld+json",
        "application/rss+xml",
        "application/atom+xml",
        "application/x-ndjson",
        "application/csv",
    }
)
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def _decode(body: bytes, charset: str | None, html: bool) -> str:
    candidates = [charset] if charset else []
    if html:
        match = _META_CHARSET.search(body[:4096])
        if match:
            candidates.append(match.group(1).decode("ascii"))
    for name in candidates:
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return body.decode(name, errors="replace")
    return body.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class _Page:
    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    cut_at_cap: bool


class WebFetchTool:
    """`web_fetch`: GET a public URL (redirects checked hop by hop) and return readable text."""

    name = "web_fetch"
    description = (
        "Fetch a web page or API response by URL (http/https only) and return its text: HTML "
        "is reduced to readable text (title, headings, paragraphs, links), JSON and plain text "
        "are returned as is. Private and local network addresses are refused. Output is cut at "
        "max_chars."
    )

    def __init__(
        self,
        allow_hosts: Sequence[str] = (),
        max_bytes: int = 2_000_000,
        timeout: float = 20,
        max_redirects: int = 5,
        user_agent: str = DEFAULT_USER_AGENT,
    ) -> None:
        self.allow = AllowList.parse(allow_hosts)
        self._ssl_context: ssl.SSLContext | None = None
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self.user_agent = user_agent
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
                "max_chars": {
                    "type": "integer",
                    "minimum": 100,
                    "maximum": MAX_MAX_CHARS,
                    "description": (
                        f"Maximum characters of text to return (default {DEFAULT_MAX_CHARS})."
                    ),
                },
            },
            "required": ["url"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raw_url = args.get("url")
        if raw_url is None:
            raise ToolError("missing required argument 'url' (a string)")
        if not isinstance(raw_url, str):
            raise ToolError(f"argument 'url' must be a string, got {type(raw_url).__name__}")
        max_chars = args.get("max_chars", DEFAULT_MAX_CHARS)
        if isinstance(max_chars, float) and max_chars.is_integer():
            max_chars = int(max_chars)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int):
            raise ToolError(
                f"argument 'max_chars' must be an integer, got {type(max_chars).__name__}"
            )
        if not 100 <= max_chars <= MAX_MAX_CHARS:
            raise ToolError(f"argument 'max_chars' must be between 100 and {MAX_MAX_CHARS}")
        url = _check_url(raw_url.strip())
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()
        async with httpx.AsyncClient(
            transport=_GuardedTransport(self.allow, self._ssl_context),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(self.timeout),
            headers={
                "User-Agent": self.user_agent,
                "Accept": "text/html,application/xhtml+xml,application/json;q=0.9,"
                "text/plain;q=0.9,*/*;q=0.5",
            },
        ) as client:
            try:
                async with asyncio.timeout(self.timeout):
                    page = await ctx.cancel.race(self._fetch(client, url))
            except (TimeoutError, httpx.TimeoutException):
                raise ToolError(
                    f"timed out after {self.timeout:g} s fetching {raw_url}; the site is slow "
                    "or unreachable, try again later or another source"
                ) from None
            except httpx.HTTPError as exc:
                raise ToolError(f"could not fetch {raw_url}: {exc}") from None
        return _render(page, raw_url, max_chars, self.max_bytes)

    async def _fetch(self, client: httpx.AsyncClient, url: httpx.URL) -> _Page:
        for _hop in range(self.max_redirects + 1):
            response = await client.send(client.build_request("GET", url), stream=True)
            try:
                location = response.headers.get("location")
                if response.status_code in _REDIRECT_STATUSES and location:
                    url = _check_url(str(url.join(location)))
                    continue
                body, cut = await self._read_capped(response)
                return _Page(
                    url=str(url),
                    status=response.status_code,
                    reason=response.reason_phrase,
                    content_type=response.headers.get("content-type", ""),
                    charset=response.charset_encoding,
                    body=body,
                    cut_at_cap=cut,
                )
            finally:
                await response.aclose()
        raise ToolError(f"too many redirects (more than {self.max_redirects}); last hop was {url}")

    async def _read_capped(self, response: httpx.Response) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_bytes:
                return b"".join(chunks)[: self.max_bytes], True
        return b"".join(chunks), False


def _check_url(raw: str) -> httpx.URL:
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise ToolError(f"invalid URL {raw!r}: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ToolError(
            f"refused URL {raw!r}: only http:// and https:// URLs can be fetched"
            + (f", not {url.scheme}://" if url.scheme else "")
        )
    if not url.host:
        raise ToolError(f"invalid URL {raw!r}: it has no host name")
    return url


def _render(page: _Page, requested: str, max_chars: int, max_bytes: int) -> ToolResult:
    mime = page.content_type.split(";", 1)[0].strip().lower()
    head = [
        f"URL: {page.url}" + (f" (redirected from {requested})" if page.url != requested else "")
    ]
    is_error = page.status >= 400
    if page.status >= 300:
        head.append(f"Status: {page.status} {page.reason}")
    sniff = page.body[:512].lstrip().lower()
    is_html = mime in _HTML_TYPES or (not mime and sniff.startswith((b"<!doctype html", b"<html")))
    is_text = (
        mime.startswith("text/")
        or mime in _TEXT_TYPES
        or mime.endswith(("+json", "+xml"))
        or (not mime and b"\x00" not in page.body[:8192])
    )
    if is_html:
        title, text = html_to_text(_decode(page.body, page.charset, html=True), page.url)
        if title:
            head.append(f"Title: {title}")
    elif is_text:
        text = _decode(page.body, page.charset, html=False)
    else:
        head.append(f"Content-Type: {mime}")
        note = (
            f"[The response is {mime} ({len(page.body):,} bytes{'+' if page.cut_at_cap else ''}),"
            " which web_fetch does not turn into text.]"
        )
        return ToolResult("\n".join(head) + "\n\n" + note, is_error=is_error)
    if len(text) > max_chars:
        text = (
            text[:max_chars] + f"\n[... truncated: showing {max_chars:,} of {len(text):,} "
            f"characters; call web_fetch with a larger max_chars (up to {MAX_MAX_CHARS:,}) for more]"
        )
    if page.cut_at_cap:
        text += f"\n[... download stopped at the {max_bytes:,}-byte size cap]"
    return ToolResult("\n".join(head) + "\n\n" + text, is_error=is_error)
