"""The dashboard in a real headless Chromium: log in, read a conversation, approve and deny
pairing (the CLI then agrees), stop a run in flight, add and remove a cron job, see the usage
chart and the live log, and fail to do any of it without the token or with a forged form.

One browser for the module (`driver`), a fresh daemon per test (`tests/harness.py`) with a
`MemoryChannel` as Telegram and the fake Anthropic server as the model. Skipped, with what to
install, where the machine has no chromium/chromedriver.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.operator.cli import main
from bot.store.rows import COPY_COLUMNS
from tests.dashboard_support import (
    TOKEN,
    Browser,
    dashboard_overrides,
    start_chromium,
    stop_chromium,
)
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

OWNER = "owner1"
SESSION = f"agent:main:telegram:bot:dm:{OWNER}"


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    chromium = start_chromium()
    try:
        yield chromium
    finally:
        stop_chromium(chromium)


@pytest.fixture
def overrides() -> dict[str, Any]:
    return dashboard_overrides(**{"channels.telegram.allow_from": [OWNER]})


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def perch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(args))
    return code, capsys.readouterr().out


async def fresh(driver: Any, url: str) -> Browser:
    """A browser with no cookie for the daemon's host (cookies ignore ports)."""
    browser = Browser(driver, url)
    await browser.open("/static/favicon.svg")
    await browser.forget()
    return browser


async def test_login_then_a_conversation_as_its_user_saw_it(
    tmp_path: Path, driver: Any, fake: FakeAnthropic, overrides: dict[str, Any]
) -> None:
    chan = MemoryChannel("telegram")
    fake.queue(
        Reply.tool_use([("read_file", {"path": "SOUL.md"})]),
        Reply.text(
            "<thinking>secret plan</thinking>Hello <b>there</b> & <script>window.pwned=1</script>"
        ),
    )
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("show me <script>window.pwned=2</script>", chat_id=OWNER)
        await chan.wait_sent(1)
        browser = await fresh(driver, daemon.parts.web.url)

        await browser.open("/sessions")
        assert (await browser.path()).startswith("/login?next=")
        await browser.fill("input[name=token]", TOKEN)
        await browser.click("form[action='/login'] button")
        await browser.wait_path("/sessions")
        [cookie] = [c for c in await browser.cookies() if c["name"] == "perch_session"]
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert TOKEN not in cookie["value"]

        row = await browser.wait_text("table.sessions tbody tr", OWNER)
        assert "telegram" in row
        await browser.click("table.sessions tbody tr a")
        await browser.wait_text("h1", OWNER)
        said = await browser.texts("li.msg .text")
        assert said == [
            "show me <script>window.pwned=2</script>",
            "Hello <b>there</b> & <script>window.pwned=1</script>",
        ]
        assert "secret plan" not in await browser.source()  # what the user never saw
        assert await browser.run_js("return window.pwned === undefined") is True
        assert await browser.texts("details.tool summary") == ["Tool read_file"]
        assert await browser.run_js("return document.querySelector('details.tool').open") is False
        await browser.click("details.tool summary")
        assert "SOUL.md" in await browser.wait_text("details.tool pre.input", "SOUL.md")


async def test_approve_and_deny_pairing_and_the_cli_agrees(
    tmp_path: Path,
    driver: Any,
    fake: FakeAnthropic,
    overrides: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        config = str(daemon.config.source)
        await chan.say("hello?", chat_id="stranger")
        await chan.say("me too", chat_id="pest")
        [first, second] = await daemon.store.pairing_requests()
        browser = await fresh(driver, daemon.parts.web.url)
        await browser.login(then="/pairing")

        await browser.wait_text("table.pending", first.code)
        await browser.click(f"tr[data-code='{first.code}'] form[action='/pairing/approve'] button")
        assert "Approved stranger on telegram" in await browser.wait_text(".flash.ok", "Approved")
        assert "stranger" in await browser.wait_text("table.approved", "stranger")
        code, out = await perch(capsys, "pairing", "list", "--approved", "--config", config)
        assert code == 0 and "stranger" in out

        await browser.click_and_confirm(
            f"tr[data-code='{second.code}'] form[action='/pairing/deny'] button"
        )
        assert second.code in await browser.wait_text(".flash.ok", "Denied")
        assert await browser.count("table.pending") == 0
        code, out = await perch(capsys, "pairing", "list", "--config", config)
        assert code == 0 and out == "No pending pairing requests.\n"
        assert not await daemon.store.is_approved("telegram", "pest")


async def test_stop_a_run_in_flight_from_the_overview(
    tmp_path: Path, driver: Any, fake: FakeAnthropic, overrides: dict[str, Any]
) -> None:
    chan = MemoryChannel("telegram")
    held = asyncio.Event()
    fake.queue(Reply.text("the late answer", hold=held))
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        assert daemon.gateway is not None
        browser = await fresh(driver, daemon.parts.web.url)
        await browser.login()
        await chan.say("think about it for a long time", chat_id=OWNER)
        await fake.wait_requests(1)
        await browser.open("/")
        assert SESSION in await browser.wait_text("li.run", SESSION)
        await browser.click("li.run form[action='/runs/stop'] button")
        assert "Stopped." in await browser.wait_text(".flash.ok", "Stopped")
        async with asyncio.timeout(5):
            await daemon.gateway.wait_idle()
        held.set()
        assert "the late answer" not in chan.texts(OWNER)
        await browser.open("/")
        assert "Nothing is running" in await browser.text("#live")


async def test_add_and_remove_a_cron_job_with_the_clis_checks(
    tmp_path: Path,
    driver: Any,
    fake: FakeAnthropic,
    overrides: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        config = str(daemon.config.source)
        browser = await fresh(driver, daemon.parts.web.url)
        await browser.login(then="/cron")

        await browser.select("select[name=kind]", "every")
        await browser.fill("input[name=expr]", "10s")
        await browser.fill("textarea[name=message]", "Too often")
        await browser.click("form.cron-add button")
        refused = await browser.wait_text(".flash.error", "perch cron add")
        assert "allow" in refused  # the CLI's own words: below one minute needs allow_fast
        assert await browser.count("table.jobs") == 0

        await browser.select("select[name=kind]", "every")
        await browser.fill("input[name=expr]", "2h")
        await browser.fill("textarea[name=message]", "Water the <plants>")
        await browser.fill("input[name=name]", "plants")
        await browser.click("form.cron-add button")
        added = await browser.wait_text(".flash.ok", "Added job")
        assert "Scheduled in the running daemon" in added
        row = await browser.wait_text("table.jobs tbody tr", "plants")
        assert "Water the <plants>" in row and "every 2h" in row
        code, out = await perch(capsys, "cron", "list", "--config", config)
        assert code == 0 and "'plants'" in out
        [job_id] = [line.split()[0] for line in out.splitlines() if "'plants'" in line]

        await browser.click_and_confirm(
            f"tr[data-job='{job_id}'] form[action='/cron/remove'] button"
        )
        assert f"Removed job {job_id}" in await browser.wait_text(".flash.ok", "Removed")
        assert await browser.count("table.jobs") == 0
        code, out = await perch(capsys, "cron", "list", "--config", config)
        assert out.startswith("No cron jobs.")


async def test_the_usage_page_draws_tokens_and_cost_per_day_and_model(
    tmp_path: Path, driver: Any, fake: FakeAnthropic, overrides: dict[str, Any]
) -> None:
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        assert daemon.store is not None
        now = time.time()
        rows = [
            (9001 + i, SESSION, f"r{i}", model, 1000 * (i + 1), 200, 0, 0, cost, now - days * 86400)
            for i, (model, cost, days) in enumerate(
                [
                    ("claude-sonnet-5-5", 0.5, 0),
                    ("local/qwen3:8b", 0.0, 0),
                    ("claude-sonnet-5-5", 1.25, 3),
                ]
            )
        ]
        assert len(rows[0]) == len(COPY_COLUMNS["usage"])
        await daemon.store.load("usage", rows)
        await daemon.store.finish_load()
        browser = await fresh(driver, daemon.parts.web.url)
        await browser.login(then="/usage")

        charts = await browser.texts("figure.chart figcaption")
        assert [c.split(" ·")[0] for c in charts] == ["Tokens per day", "Cost per day"]
        tokens = await browser.run_js(
            "return [...document.querySelectorAll('figure.chart')[0].querySelectorAll('rect')]"
            ".map(r => [r.getAttribute('class'), r.querySelector('title').textContent,"
            " r.getBoundingClientRect().height > 0])"
        )
        assert len(tokens) == 3 and all(visible for _, _, visible in tokens)
        assert {title.split(" · ")[1].rsplit(": ", 1)[0] for _, title, _ in tokens} == {
            "claude-sonnet-5-5",
            "local/qwen3:8b",
        }
        cost_bars = await browser.run_js(
            "return document.querySelectorAll('figure.chart')[1].querySelectorAll('rect').length"
        )
        assert cost_bars == 2  # no bar for a model that cost nothing
        legend = await browser.texts(".legend li")  # one legend per chart
        assert legend == ["claude-sonnet-5-5", "local/qwen3:8b"] * 2
        assert "$1.7500" in await browser.text("table.models")


async def test_the_logs_page_follows_new_lines_redacted(
    tmp_path: Path,
    driver: Any,
    fake: FakeAnthropic,
    overrides: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)  # as `logging.level: INFO` does in the daemon
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        browser = await fresh(driver, daemon.parts.web.url)
        await browser.login(then="/logs")
        await browser.wait_text("#log", "dashboard at")  # the start-up lines are there
        logging.getLogger("bot.test").warning(
            "leaked sk-ant-abcdefghijklmnop and the dashboard token %s", TOKEN
        )
        line = await browser.wait_text("#log li.level-warning", "leaked")
        assert "sk-ant-abcdefghijklmnop" not in line and TOKEN not in line
        assert line.count("[REDACTED]") == 2
        await browser.open("/")
        assert "leaked [REDACTED]" in await browser.text("#problems")


async def attacker_site(forms: str) -> tuple[web.AppRunner, str]:
    """A page on another origin (another port of 127.0.0.1) holding `forms`."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text=f"<!doctype html><title>win a prize</title>{forms}", content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/"


async def test_nothing_happens_without_the_token_or_with_a_forged_form(
    tmp_path: Path, driver: Any, fake: FakeAnthropic, overrides: dict[str, Any]
) -> None:
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon:
        await chan.say("let me in", chat_id="stranger")
        [pending] = await daemon.store.pairing_requests()
        url = daemon.parts.web.url.rstrip("/")
        browser = await fresh(driver, url)

        for path in ("/", "/sessions", "/pairing", "/approvals", "/cron", "/usage", "/logs"):
            await browser.open(path)
            assert (await browser.path()).startswith("/login"), path
        await browser.fill("input[name=token]", "not-the-token-at-all")
        await browser.click("form[action='/login'] button")
        assert "not the dashboard's token" in await browser.text(".flash.error")
        await browser.open("/pairing")
        assert (await browser.path()).startswith("/login")

        await browser.login(then="/pairing")
        csrf = await browser.run_js("return document.querySelector('input[name=csrf]').value")
        await browser.run_js(
            "document.querySelectorAll('input[name=csrf]').forEach(e => e.remove())"
        )
        await browser.click(
            f"tr[data-code='{pending.code}'] form[action='/pairing/approve'] button"
        )
        assert "forged" in await browser.wait_text("main", "no valid CSRF token")
        fields = (
            f'<input name="channel" value="telegram"><input name="code" value="{pending.code}">'
        )
        runner, evil = await attacker_site(
            f'<form id="bare" method="post" action="{url}/pairing/approve">{fields}'
            "<button>claim</button></form>"
            f'<form id="stolen" method="post" action="{url}/pairing/approve">{fields}'
            f'<input name="csrf" value="{csrf}"><button>claim</button></form>'
            f'<form id="cron" method="post" action="{url}/cron/add"><input name="kind" value="every">'
            '<input name="expr" value="1h"><input name="message" value="x"><button>go</button></form>'
        )
        try:
            for form, why in (
                ("bare", "That form did not come from this dashboard."),
                ("stolen", "That form did not come from this dashboard."),
                ("cron", "That form did not come from this dashboard."),
            ):
                await browser._do(lambda: browser.driver.get(evil))
                await browser.click(f"#{form} button")
                assert why in await browser.wait_text("main", why), form
        finally:
            await runner.cleanup()
        assert [r.code for r in await daemon.store.pairing_requests()] == [pending.code]
        assert await daemon.store.cron_all() == []
        assert not await daemon.store.is_approved("telegram", "stranger")
