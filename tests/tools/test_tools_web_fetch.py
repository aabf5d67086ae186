"""web_fetch against a local aiohttp server reachable only through the allow-list.

Every socket connect in these tests is recorded with a `socket.connect` audit hook, so each test
can assert that refused targets were never connected to and that nothing but 127.0.0.1 was.
"""

from __future__ import annotations

import asyncio
import ipaddress
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from agents.cancel import Cancelled
from agents.tools.base import ToolContext, ToolError
from agents.tools.web_fetch import (
    AllowList,
    FetchRefused,
    WebFetchTool,
    address_problem,
    html_to_text,
)

_recording: list[list[Any]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _recording:
        _recording[-1].append(args[1])


sys.addaudithook(_audit)


@pytest.fixture
def connects() -> Iterator[list[Any]]:
    """Addresses of every socket.connect made while the test runs."""
    seen: list[Any] = []
    _recording.append(seen)
    yield seen
    _recording.remove(seen)
    assert all(addr[0] == "127.0.0.1" for addr in seen), f"connected elsewhere: {seen}"


PAGE = """<!doctype html><html><head><title>Perch  Test Page</title>
<style>body { color: red }</style><script>alert("<p>not text</p>")</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About</a></nav>
<h1>Hello &amp; welcome</h1>
<p>First   paragraph,
with a <a href="/docs">docs link</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


class Server:
    def __init__(self) -> None:
        self.port = 0
        self.never = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.hits: list[str] = []


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    state = Server()

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def json_doc(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "items": [1, 2]})

    async def big(request: web.Request) -> web.Response:
        return web.Response(text="a" * 100_000, content_type="text/plain")

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        while True:
            await response.write(b"b" * 4096)

    async def slow(request: web.Request) -> web.Response:
        state.slow_started.set()
        await state.never.wait()
        return web.Response(text="too late")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def image(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n" + bytes(100), content_type="image/png")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such page", content_type="text/plain")

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        state.hits.append(request.path_qs)
        response: web.StreamResponse = await handler(request)
        return response

    app = web.Application(middlewares=[record])
    app.router.add_get("/page", page)
    app.router.add_get("/json", json_doc)
    app.router.add_get("/big", big)
    app.router.add_get("/endless", endless)
    app.router.add_get("/slow", slow)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop", loop)
    app.router.add_get("/image", image)
    app.router.add_get("/missing", missing)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    state.port = runner.addresses[0][1]
    try:
        yield state
    finally:
        await runner.cleanup()


def ctx_for(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key="agent:main:test")


def allowed(**kwargs: Any) -> WebFetchTool:
    return WebFetchTool(allow_hosts=["127.0.0.1"], **kwargs)


async def test_allowed_html_page_is_reduced_to_readable_text(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/page"
    result = await allowed().run({"url": url}, ctx_for(tmp_path))
    assert not result.is_error
    assert result.content == (
        f"URL: {url}\nTitle: Perch Test Page\n\n# Hello & welcome\n\n"
        f"First paragraph, with a docs link (http://127.0.0.1:{server.port}/docs).\n\n- one\n- two"
    )
    assert connects and all(addr[0] == "127.0.0.1" for addr in connects)


async def test_json_is_passed_through(server: Server, connects: list[Any], tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.port}/json"
    result = await allowed().run({"url": url}, ctx_for(tmp_path))
    assert result.content.endswith('\n\n{"ok": true, "items": [1, 2]}')


async def test_binary_content_gets_a_note_instead_of_bytes(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/image"
    result = await allowed().run({"url": url}, ctx_for(tmp_path))
    assert "Content-Type: image/png" in result.content
    assert "[The response is image/png (108 bytes), which web_fetch does not turn into text.]" in (
        result.content
    )


async def test_http_errors_are_reported_with_status(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/missing"
    result = await allowed().run({"url": url}, ctx_for(tmp_path))
    assert result.is_error
    assert "Status: 404 Not Found" in result.content and "no such page" in result.content


async def test_text_is_truncated_to_max_chars_with_a_marker(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/big"
    result = await allowed().run({"url": url, "max_chars": 1000}, ctx_for(tmp_path))
    body = result.content.split("\n\n", 1)[1]
    assert body.startswith("a" * 1000 + "\n[... truncated: showing 1,000 of 100,000 characters")


async def test_download_stops_at_the_byte_cap(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/big"
    result = await allowed(max_bytes=10_000).run(
        {"url": url, "max_chars": 200_000}, ctx_for(tmp_path)
    )
    body = result.content.split("\n\n", 1)[1]
    assert body == "a" * 10_000 + "\n[... download stopped at the 10,000-byte size cap]"


async def test_endless_stream_is_cut_at_the_byte_cap(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/endless"
    result = await asyncio.wait_for(
        allowed(max_bytes=50_000).run({"url": url}, ctx_for(tmp_path)), timeout=10
    )
    assert "download stopped at the 50,000-byte size cap" in result.content


async def test_slow_server_hits_the_time_cap(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/slow"
    with pytest.raises(ToolError, match=r"timed out after 0\.3 s"):
        await asyncio.wait_for(allowed(timeout=0.3).run({"url": url}, ctx_for(tmp_path)), 10)


async def test_cancel_token_stops_a_fetch(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    ctx = ctx_for(tmp_path)
    url = f"http://127.0.0.1:{server.port}/slow"
    task = asyncio.create_task(allowed(timeout=30).run({"url": url}, ctx))
    await asyncio.wait_for(server.slow_started.wait(), timeout=5)
    ctx.cancel.cancel("cancelled by user")
    with pytest.raises(Cancelled):
        await asyncio.wait_for(task, timeout=5)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:{port}/page", "loopback"),
        ("http://localhost:{port}/page", "loopback"),
        ("http://LOCALHOST.:{port}/page", "loopback"),
        ("http://[::1]:{port}/page", "loopback"),
        ("http://2130706433:{port}/page", "loopback"),
        ("http://0x7f.1:{port}/page", "loopback"),
        ("http://[::ffff:127.0.0.1]:{port}/page", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://[fd00::1]/", "private"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("https://0.0.0.0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
    ],
)
async def test_private_and_local_targets_are_refused_before_connecting(
    server: Server, connects: list[Any], tmp_path: Path, url: str, problem: str
) -> None:
    tool = WebFetchTool()
    with pytest.raises(FetchRefused, match=problem):
        await tool.run({"url": url.format(port=server.port)}, ctx_for(tmp_path))
    assert connects == []
    assert server.hits == []


async def test_allow_list_of_another_address_does_not_open_loopback(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    tool = WebFetchTool(allow_hosts=["10.0.0.0/8", "intranet.example"])
    with pytest.raises(FetchRefused, match="loopback"):
        await tool.run({"url": f"http://127.0.0.1:{server.port}/page"}, ctx_for(tmp_path))
    assert connects == []


async def test_redirect_from_allowed_server_to_refused_target_is_refused(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    for target in ("http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/admin"):
        url = f"http://127.0.0.1:{server.port}/redirect?to={target}"
        with pytest.raises(FetchRefused, match="refused to fetch"):
            await allowed().run({"url": url}, ctx_for(tmp_path))
    assert {addr[0] for addr in connects} == {"127.0.0.1"}


async def test_redirect_to_a_non_http_scheme_is_refused(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/redirect?to=file:///etc/passwd"
    with pytest.raises(ToolError, match="only http:// and https://"):
        await allowed().run({"url": url}, ctx_for(tmp_path))


async def test_allowed_redirect_is_followed_and_reported(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/redirect?to=/json"
    result = await allowed().run({"url": url}, ctx_for(tmp_path))
    assert result.content.startswith(
        f"URL: http://127.0.0.1:{server.port}/json (redirected from {url})"
    )


async def test_redirect_loops_stop_at_max_redirects(
    server: Server, connects: list[Any], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/loop"
    with pytest.raises(ToolError, match=r"too many redirects \(more than 3\)"):
        await allowed(max_redirects=3).run({"url": url}, ctx_for(tmp_path))
    assert server.hits == ["/loop"] * 4


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "missing required argument 'url'"),
        ({"url": 5}, "'url' must be a string"),
        ({"url": "file:///etc/passwd"}, "only http:// and https://"),
        ({"url": "ftp://example.com/"}, "only http:// and https://"),
        ({"url": "example.com/page"}, "only http:// and https://"),
        ({"url": "http:///nohost"}, "no host name"),
        ({"url": "http://example.com", "max_chars": "10"}, "'max_chars' must be an integer"),
        ({"url": "http://example.com", "max_chars": 10**9}, "between 100 and"),
    ],
)
async def test_bad_arguments_are_refused_without_any_network(
    connects: list[Any], tmp_path: Path, args: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ToolError, match=fragment):
        await WebFetchTool().run(args, ctx_for(tmp_path))
    assert connects == []


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("127.0.0.53", "loopback"),
        ("::ffff:10.1.2.3", "private"),
        ("2002:7f00:1::1", "loopback"),
        ("2002:a00:1::1", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("64:ff9b::808:808", None),
        ("100.127.255.255", "carrier-grade NAT"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::", "unspecified"),
        ("192.0.2.1", "private"),
    ],
)
def test_address_problem_table(address: str, problem: str | None) -> None:
    result = address_problem(ipaddress.ip_address(address))
    if problem is None:
        assert result is None
    else:
        assert result is not None and result.startswith(problem)


_REFUSED_V4 = [
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


@given(st.ip_addresses(v=4))
def test_ipv4_verdict_matches_the_refused_ranges_and_survives_ipv6_mapping(
    ip: ipaddress.IPv4Address,
) -> None:
    verdict = address_problem(ip)
    if any(ip in net for net in _REFUSED_V4):
        assert verdict is not None
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    assert (address_problem(mapped) is None) == (verdict is None)


def test_allow_list_matches_hosts_suffixes_and_networks() -> None:
    allow = AllowList.parse(["Intranet.Example.", "*.lan", "192.168.1.0/24", "[fd00::1]", " "])
    assert allow.allows_host("intranet.example")
    assert allow.allows_host("nas.lan") and allow.allows_host("a.b.lan")
    assert not allow.allows_host("lan") and not allow.allows_host("evil-lan")
    assert allow.allows_address(ipaddress.ip_address("192.168.1.77"))
    assert allow.allows_address(ipaddress.ip_address("fd00::1"))
    assert not allow.allows_address(ipaddress.ip_address("192.168.2.1"))


@given(st.text(max_size=300))
def test_html_to_text_never_leaks_script_or_style_content(noise: str) -> None:
    html = f"<p>{noise}</p><script>SECRET_SCRIPT</script><style>SECRET_STYLE</style>"
    if "SECRET" in noise or "<" in noise:
        return
    title, text = html_to_text(html)
    assert "SECRET_SCRIPT" not in text and "SECRET_STYLE" not in text
    assert title == ""


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("192.0.0.192", "non-global"),  # cloud metadata; Python 3.11 calls it global
        ("192.0.0.8", "non-global"),
        ("::ffff:192.0.0.192", "non-global"),
        ("64:ff9b::c000:c0", "non-global"),  # NAT64 form of 192.0.0.192
        ("2002:c000:c0::1", "non-global"),  # 6to4 form of 192.0.0.192
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 form of 169.254.169.254
        ("fec0::1", "site-local"),
        ("64:ff9b:1::1", "reserved"),
        ("198.18.0.1", "private"),
        ("2001:db8::1", "private"),
        ("1.1.1.1", None),
    ],
)
def test_only_global_addresses_pass(address: str, problem: str | None) -> None:
    result = address_problem(ipaddress.ip_address(address))
    if problem is None:
        assert result is None
    else:
        assert result is not None and result.startswith(problem)


def _carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in ipaddress.IPv6Network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


@given(st.ip_addresses())
def test_every_fetchable_address_is_global(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    if address_problem(ip) is not None:
        return
    carried = _carried_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    assert (carried or ip).is_global
    for net in ("192.0.0.0/24", "fec0::/10", "64:ff9b:1::/48", "100.64.0.0/10"):
        network = ipaddress.ip_network(net)
        assert not (ip.version == network.version and ip in network)
    if isinstance(ip, ipaddress.IPv6Address) and ip.sixtofour is not None:
        assert ip.sixtofour.is_global


@pytest.mark.parametrize(
    "url", ["http://xn--.com/", "http://xn--a.com/", "http://xn--ls8h.la/", "http://☃.com/"]
)
async def test_malformed_idna_hosts_are_tool_errors(
    connects: list[Any], tmp_path: Path, url: str
) -> None:
    with pytest.raises(ToolError, match="invalid URL"):
        await WebFetchTool().run({"url": url}, ctx_for(tmp_path))
    assert connects == []


async def test_a_redirect_to_a_malformed_idna_host_is_a_tool_error(
    connects: list[Any], server: Server, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{server.port}/redirect?to=http://xn--.com/"
    with pytest.raises(ToolError, match=r"could not fetch .*IDNAError: Malformed A-label"):
        await allowed().run({"url": url}, ctx_for(tmp_path))


async def test_metadata_address_is_refused_and_allow_hosts_can_open_it(tmp_path: Path) -> None:
    with pytest.raises(FetchRefused, match="non-global"):
        await WebFetchTool().run({"url": "http://192.0.0.192/latest"}, ctx_for(tmp_path))
    with pytest.raises(FetchRefused, match="site-local"):
        await WebFetchTool().run({"url": "http://[fec0::1]/"}, ctx_for(tmp_path))
    tool = WebFetchTool(allow_hosts=["192.0.0.192/32"])
    assert tool.allow.allows_address(ipaddress.ip_address("192.0.0.192"))
