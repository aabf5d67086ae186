"""`web_fetch {url, max_chars?}`: fetch a public http(s) page and return it as readable text.

Every connection goes through the SSRF guard of net_guard.py (global addresses only, checked
per connection and redirect hop, connecting to exactly the checked address) on an aiohttp
session of its own; HTML becomes text with html_text.py. Every failure (bad or non-IDNA URL,
refused address, network error, timeout) is a `ToolError` the model can read.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urljoin, urlsplit

import aiohttp
import idna

from agents.cancel import Cancelled
from agents.tools.base import ToolContext, ToolError, ToolResult
from agents.tools.html_text import html_to_text
from agents.tools.net_guard import (
    AllowList,
    FetchRefused,
    GuardedResolver,
    address_problem,
    resolve_checked,
)

__all__ = ["AllowList", "FetchRefused", "WebFetchTool", "address_problem", "html_to_text"]

DEFAULT_USER_AGENT = "Perch/0.1 (personal assistant; web_fetch)"
DEFAULT_MAX_CHARS = 20_000
MAX_MAX_CHARS = 200_000
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

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
        "Fetch an http(s) URL as text: HTML made readable (title, headings, paragraphs, "
        "links), JSON and plain text as they are; no JavaScript, logins or forms. Private and "
        "local addresses are refused; output is cut at max_chars."
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
            self._ssl_context = ssl.create_default_context()  # the system's store
        connector = aiohttp.TCPConnector(
            resolver=GuardedResolver(self.allow),
            use_dns_cache=False,  # every connection asks the guard
            ssl=self._ssl_context,
            limit=4,
        )
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            headers={
                "User-Agent": self.user_agent,
                "Accept": "text/html,application/xhtml+xml,application/json;q=0.9,"
                "text/plain;q=0.9,*/*;q=0.5",
            },
        ) as session:
            try:
                async with asyncio.timeout(self.timeout):
                    page = await ctx.cancel.race(self._fetch(session, url))
            except TimeoutError:
                raise ToolError(
                    f"timed out after {self.timeout:g} s fetching {raw_url}; the site is slow "
                    "or unreachable, try again later or another source"
                ) from None
            except aiohttp.ClientError as exc:
                raise ToolError(f"could not fetch {raw_url}: {exc}") from None
            except (ToolError, Cancelled):
                raise
            except Exception as exc:  # IDNA, codec, TLS setup: whatever it is, the model reads it
                raise ToolError(f"could not fetch {raw_url}: {type(exc).__name__}: {exc}") from None
        return _render(page, raw_url, max_chars, self.max_bytes)

    async def _fetch(self, session: aiohttp.ClientSession, url: str) -> _Page:
        for _hop in range(self.max_redirects + 1):
            parts = urlsplit(url)  # checked here too: aiohttp connects to an IP literal
            await resolve_checked(parts.hostname or "", parts.port or 0, self.allow)  # directly
            async with session.get(url, allow_redirects=False) as response:
                location = response.headers.get("location")
                if response.status in _REDIRECT_STATUSES and location:
                    url = _parsed_url(urljoin(url, location))
                    continue
                body, cut = await self._read_capped(response)
                return _Page(
                    url=url,
                    status=response.status,
                    reason=response.reason or "",
                    content_type=response.headers.get("content-type", ""),
                    charset=response.charset,
                    body=body,
                    cut_at_cap=cut,
                )
        raise ToolError(f"too many redirects (more than {self.max_redirects}); last hop was {url}")

    async def _read_capped(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_bytes:
                return b"".join(chunks)[: self.max_bytes], True
        return b"".join(chunks), False


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _check_url(raw: str) -> str:
    """`raw` as the URL to fetch, or a `ToolError` naming what is wrong with it."""
    try:
        return _parsed_url(raw)
    except ValueError as exc:  # idna.IDNAError is a UnicodeError, a ValueError
        raise ToolError(f"invalid URL {raw!r}: {exc}") from None


def _parsed_url(raw: str) -> str:
    """An http(s) URL with its host in ASCII (IDNA 2008); `ToolError` for another scheme or
    no host, `ValueError` (IDNA errors included) for a malformed one."""
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(
            f"refused URL {raw!r}: only http:// and https:// URLs can be fetched"
            + (f", not {scheme}://" if scheme else "")
        )
    host = parts.hostname
    if not host:
        raise ToolError(f"invalid URL {raw!r}: it has no host name")
    _ = parts.port  # a malformed port raises ValueError here
    if _is_ip_literal(host):
        return parts.geturl()
    ascii_host = _idna_host(host)
    return _with_host(parts, ascii_host).geturl()


def _idna_host(host: str) -> str:
    """The host name in ASCII: Unicode names encoded, A-labels ("xn--") checked by decoding."""
    if not host.isascii():
        return idna.encode(host.lower()).decode("ascii")
    if any(label.startswith("xn--") for label in host.split(".")):
        idna.decode(host)
    return host.lower()


def _with_host(parts: SplitResult, host: str) -> SplitResult:
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    if parts.username is not None:
        netloc = f"{parts.netloc.rpartition('@')[0]}@{netloc}"
    return parts._replace(netloc=netloc)


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
