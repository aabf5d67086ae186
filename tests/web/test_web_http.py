"""The dashboard over plain HTTP (aiohttp's client): its locks, headers and escaping, the
token it makes when none is set, the live log stream, and several instances on one
PostgreSQL seen (and stopped) from any one's dashboard.

The browser journeys are `test_web_browser.py`'s; these check what a browser hides (status
codes, headers, cookies) and what needs no browser.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.daemon import Daemon, StartupError
from bot.web.server import token_path
from tests.dashboard_support import TOKEN, dashboard_overrides
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import make_config, running_daemon
from tests.waiting import eventually

PAGES = ("/", "/sessions", "/pairing", "/approvals", "/cron", "/usage", "/logs")
CHANGES = (
    ("/runs/stop", {"session": "agent:main:telegram:bot:dm:u1"}),
    ("/pairing/approve", {"channel": "telegram", "code": "AAAA2222"}),
    ("/pairing/deny", {"channel": "telegram", "code": "AAAA2222"}),
    ("/pairing/revoke", {"channel": "telegram", "sender": "u1"}),
    ("/cron/add", {"kind": "every", "expr": "1h", "message": "x"}),
    ("/cron/remove", {"id": "nope"}),
    ("/logout", {}),
)
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    jar = aiohttp.CookieJar(unsafe=True)  # keep cookies of an IP address host
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        yield session


async def login(client: aiohttp.ClientSession, url: str, token: str = TOKEN) -> str:
    """Log in through the form; returns the CSRF token of the session."""
    async with client.post(
        url + "login", data={"token": token, "next": "/pairing"}, headers={"Origin": url[:-1]}
    ) as response:
        assert response.status == 200 and response.url.path == "/pairing"
        page = await response.text()
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None
    return found.group(1)


async def test_every_page_and_file_carries_a_strict_policy_and_no_inline_code(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url
        for path in (*PAGES, "/login", "/static/app.css", "/static/app.js", "/nowhere"):
            async with client.get(url.rstrip("/") + path, headers=BEARER) as response:
                body = await response.text()
                headers = response.headers
            assert response.status == (404 if path == "/nowhere" else 200), path
            policy = headers["Content-Security-Policy"]
            assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
            assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Referrer-Policy"] == "same-origin"
            if path.startswith("/static/"):
                continue
            assert headers["Cache-Control"] == "no-store"
            assert not re.search(r"<script(?![^>]*\bsrc=)", body), path  # no inline script
            assert not re.search(r"\sstyle=|<style", body), path  # no inline style
            assert not re.search(r"\son[a-z]+=", body), path  # no inline handler


async def test_nothing_is_shown_or_changed_without_the_token(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url.rstrip("/")
        for path in PAGES:
            async with client.get(url + path, allow_redirects=False) as response:
                assert response.status == 303, path
                assert response.headers["Location"].startswith("/login?next=")
        async with client.get(url + "/logs/stream") as response:
            assert response.status == 401
        for path, form in CHANGES:
            async with client.post(url + path, data=form, headers={"Origin": url}) as response:
                assert response.status == 401, path
        forged = {"Cookie": "perch_session=1700000000.abc.0123", "Origin": url}
        async with client.post(url + "/cron/add", data=CHANGES[4][1], headers=forged) as response:
            assert response.status == 401
        assert daemon.store is not None and await daemon.store.cron_all() == []


async def test_wrong_tokens_are_limited_per_address_then_refused_with_429_the_right_one_never(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url
        origin = {"Origin": url[:-1]}
        for attempt in range(4):
            async with client.post(
                url + "login", data={"token": f"guess-{attempt}"}, headers=origin
            ) as r:
                assert r.status == 401 and "not the dashboard" in await r.text()
        async with client.get(url, headers={"Authorization": "Bearer guess-5"}) as r:
            assert r.status == 401 and r.headers["WWW-Authenticate"].startswith("Bearer")
        async with client.post(url + "login", data={"token": "guess-6"}, headers=origin) as r:
            assert r.status == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
        async with client.get(url, headers={"Authorization": "Bearer guess-7"}) as r:
            assert r.status == 429
        assert not [c for c in client.cookie_jar if c.key == "perch_session"]
        async with client.get(url, headers=BEARER) as r:  # the right token is never held back
            assert r.status == 200
        async with client.post(url + "login", data={"token": TOKEN}, headers=origin) as r:
            assert r.status == 200 and r.url.path == "/"
        assert [c for c in client.cookie_jar if c.key == "perch_session"]


async def test_a_browser_session_changes_only_with_its_csrf_token_from_its_own_origin(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        assert daemon.store is not None
        url = daemon.parts.web.url
        csrf = await login(client, url)
        [cookie] = [c for c in client.cookie_jar if c.key == "perch_session"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        assert TOKEN not in cookie.value
        job = {"kind": "every", "expr": "1h", "message": "stretch", "csrf": csrf}
        refusals = [
            ({"Origin": url[:-1]}, {**job, "csrf": ""}, "no valid CSRF token"),
            ({"Origin": url[:-1]}, {**job, "csrf": "0" * 64}, "no valid CSRF token"),
            ({"Origin": "http://127.0.0.1:1"}, job, "did not come from this dashboard"),
            ({"Origin": "null"}, job, "did not come from this dashboard"),
            ({}, job, "did not come from this dashboard"),  # neither Origin nor Referer
            ({"Referer": "http://evil.example/x"}, job, "did not come from this dashboard"),
        ]
        for headers, form, why in refusals:
            async with client.post(url + "cron/add", data=form, headers=headers) as r:
                assert r.status == 403 and why in await r.text(), (headers, form)
        assert await daemon.store.cron_all() == []
        async with client.post(url + "cron/add", data=job, headers={"Referer": url + "cron"}) as r:
            assert r.status == 200 and r.url.path == "/cron"
            assert "Added job" in await r.text()
        assert len(await daemon.store.cron_all()) == 1
        huge = {**job, "message": "x" * 300_000}  # past the body limit: refused, not cut
        async with client.post(url + "cron/add", data=huge, headers={"Origin": url[:-1]}) as r:
            assert r.status == 413
        assert len(await daemon.store.cron_all()) == 1


async def test_a_bearer_token_reads_and_changes_without_a_form_token(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, dashboard_overrides()) as daemon:
        assert daemon.store is not None
        await chan.say("hi", chat_id="stranger")
        [pending] = await daemon.store.pairing_requests()
        url = daemon.parts.web.url
        form = {"channel": "telegram", "code": pending.code.lower()}
        async with client.post(url + "pairing/deny", data=form, headers=BEARER) as r:
            assert r.status == 200 and f"Denied code {pending.code}" in await r.text()
        assert await daemon.store.pairing_requests() == []


async def test_message_text_is_shown_as_text_never_as_markup(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    chan = MemoryChannel("telegram")
    evil = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    fake.queue(Reply.text(f"you said {evil}"))
    overrides = dashboard_overrides(**{"channels.telegram.allow_from": ["u1"]})
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say(evil, chat_id="u1")
        await chan.wait_sent(1)
        url = daemon.parts.web.url
        key = "agent:main:telegram:bot:dm:u1"
        async with client.get(url + "sessions/view", params={"key": key}, headers=BEARER) as r:
            page = await r.text()
        assert r.status == 200
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in page
        assert page.count("&lt;img src=x onerror=&#34;alert(1)&#34;&gt;") == 2
        async with client.get(
            url + "sessions/view", params={"key": "agent:main:nope"}, headers=BEARER
        ) as r:
            assert r.status == 404


async def test_the_log_stream_sends_new_lines_redacted_and_resumes(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url
        async with client.get(url + "logs/stream", headers=BEARER) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            logging.getLogger("bot.test").error("key sk-ant-0123456789abcdef for %s", TOKEN)
            event = await _next_event(stream)
        data = json.loads(event["data"])
        assert data["level"] == "ERROR"
        assert data["text"].endswith("key [REDACTED] for [REDACTED]")
        logging.getLogger("bot.test").error("second line")
        resume = {**BEARER, "Last-Event-ID": event["id"]}
        async with client.get(url + "logs/stream", headers=resume) as stream:
            again = await _next_event(stream)
        assert json.loads(again["data"])["text"].endswith("second line")
        assert int(again["id"]) > int(event["id"])
        stale = {**BEARER, "Last-Event-ID": "999999"}  # numbered before a restart: from the top
        async with client.get(url + "logs/stream", headers=stale) as stream:
            assert (await _next_event(stream))["id"] == "1"


async def _next_event(stream: aiohttp.ClientResponse) -> dict[str, str]:
    fields: dict[str, str] = {}
    async with asyncio.timeout(5):
        while True:
            line = (await stream.content.readline()).decode().rstrip("\n")
            if not line and fields:
                return fields
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value


async def test_without_a_configured_token_one_is_made_private_and_kept(
    tmp_path: Path,
    fake: FakeAnthropic,
    client: aiohttp.ClientSession,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    overrides = {"web": {"enabled": True, "listen": "127.0.0.1:0"}}
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        path = token_path(daemon.config)
        token = path.read_text().strip()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 32
        assert f"log in with the token in {path}" in caplog.text and token not in caplog.text
        url = daemon.parts.web.url
        await login(client, url, token)
        async with client.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 401
    async with running_daemon(tmp_path, fake, {}, overrides):
        assert path.read_text().strip() == token  # kept across restarts
    path.chmod(0o644)  # readable by others: not a secret any more, so a new one
    async with running_daemon(tmp_path, fake, {}, overrides):
        assert path.read_text().strip() != token
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_taken_dashboard_port_stops_the_start_with_one_line(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = {"web": {"enabled": True, "listen": f"127.0.0.1:{port}", "token": TOKEN}}
        config = make_config(tmp_path, fake.base_url, settings)
        with pytest.raises(StartupError, match=f"serving the dashboard on 127.0.0.1:{port} failed"):
            await Daemon(config, channels={}).start()


@pytest.mark.timeout(90)
async def test_any_instances_dashboard_shows_and_stops_the_others_runs(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession, pg_url: str
) -> None:
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    settings: dict[str, Any] = {
        "channels.telegram.dm_policy": "open",
        "channels.telegram.allow_from": ["*"],
        "channels.telegram.mode": "webhook",  # both instances receive
        "channels.telegram.webhook_url": "https://bot.example/hook",
        "channels.telegram.webhook_secret": "hook-s3cret",
        "store.url": pg_url,
        "store.lease": "3s",
    }
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    first = MemoryChannel("telegram")
    async with (
        running_daemon(tmp_path / "one", fake, {"telegram": first}, settings) as one,
        running_daemon(tmp_path / "two", fake, {}, {**settings, **dashboard_overrides()}) as two,
    ):
        assert one.gateway is not None
        await first.say("a long question", chat_id="u7")
        await fake.wait_requests(1)
        key = "agent:main:telegram:bot:dm:u7"
        url = two.parts.web.url

        async def overview() -> str:
            async with client.get(url, headers=BEARER) as r:
                return await r.text()

        async def listed() -> bool:
            return key in await overview()

        await _until(listed, 15)
        page = await overview()
        assert page.count('class="instance"') == 2 and "this one" in page
        async with client.post(url + "runs/stop", data={"session": key}, headers=BEARER) as r:
            assert "Stopped. (" in await r.text()
        await eventually(lambda: one.gateway.status()["active_runs"] == 0, timeout=15)  # type: ignore[union-attr]
        gate.set()
        assert first.texts("u7") == []


async def _until(check: Any, timeout: float) -> None:
    """Until `check()` (a page shows what another instance's beat reported), bounded."""
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.2)


async def test_logging_out_ends_the_session_on_the_server(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url
        csrf = await login(client, url)
        cookie = next(c for c in client.cookie_jar if c.key == "perch_session").value
        async with client.post(
            url + "logout", data={"csrf": csrf}, headers={"Origin": url[:-1]}
        ) as out:
            assert out.status == 200 and out.url.path == "/login"
        kept = {"Cookie": f"perch_session={cookie}"}  # the cookie, copied before
        async with (
            aiohttp.ClientSession() as copy,
            copy.get(url + "pairing", headers=kept, allow_redirects=False) as again,
        ):
            assert again.status == 303 and again.headers["Location"].startswith("/login")


async def _attempt(url: str, token: str, source: str) -> int:
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(
            url + "pairing", headers={"Authorization": f"Bearer {token}"}, allow_redirects=False
        ) as response,
    ):
        return response.status


async def test_a_lockout_never_refuses_the_right_token_and_holds_every_address(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    async with running_daemon(tmp_path, fake, {}, dashboard_overrides()) as daemon:
        url = daemon.parts.web.url
        codes = [await _attempt(url, "wrong-token-0123456789", "127.0.0.1") for _ in range(6)]
        assert codes == [401] * 5 + [429]
        assert await _attempt(url, TOKEN, "127.0.0.1") == 200  # locked out, but the owner
        codes = [await _attempt(url, f"guess-{n}-0123456789", f"127.0.0.{n}") for n in range(2, 40)]
        assert 429 in codes and codes.count(401) <= 20  # other addresses: limited together
        assert await _attempt(url, "one-more-guess-0123456", "127.0.0.77") == 429
        assert await _attempt(url, TOKEN, "127.0.0.77") == 200


async def test_no_page_shows_a_url_password_a_chat_holds(
    tmp_path: Path, fake: FakeAnthropic, client: aiohttp.ClientSession
) -> None:
    chan = MemoryChannel("telegram")
    pasted = "the db is postgresql://perch:p/ss#w0rd?x@db.example/perch"
    fake.queue(Reply.text(f"noted: {pasted}"))
    overrides = dashboard_overrides(**{"channels.telegram.allow_from": ["u1"]})
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say(pasted, chat_id="u1")
        await chan.wait_sent(1, timeout=30)
        url = daemon.parts.web.url
        key = "agent:main:telegram:bot:dm:u1"
        async with client.get(url + "sessions/view", params={"key": key}, headers=BEARER) as r:
            page = await r.text()
    assert r.status == 200 and "postgresql://perch:***@db.example/perch" in page
    assert "p/ss" not in page and "w0rd" not in page
