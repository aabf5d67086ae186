"""The `browser` tool against pages served on 127.0.0.1, in Debian's Chromium through
Playwright: a page that builds itself with JavaScript read through its snapshot, a form filled
and submitted by refs, a screenshot sent to a Telegram chat end to end, and the SSRF guard:
a page whose scripts, images and redirects reach for private addresses and the metadata
address gets nothing (the servers behind those addresses see no request), tabs, /new dropping
the session's cookies, downloads into the inbox."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from agents.tools.base import ToolContext, ToolError
from agents.tools.browser import BrowserTool
from agents.tools.browser_pool import BrowserPool, BrowserSettings, find_chromium
from bot.daemon import Daemon
from bot.operator.doctor_browser import browser_check
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config
from tests.media_support import tool_results

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        find_chromium(None) is None or shutil.which("chromium") is None,
        reason="no Chromium on this machine (.ci/run installs Debian's chromium)",
    ),
]

JS_PAGE = """<!doctype html><title>Built</title><body><div id=app>loading</div><script>
setTimeout(() => { document.getElementById('app').innerHTML =
  '<h1>Built by script</h1><p>The answer is 42.</p>'; }, 50);
</script></body>"""

FORM_PAGE = """<!doctype html><title>Sign up</title><form method=post action=/submit>
<label>Name <input name=name></label>
<label>Plan <select name=plan><option value=free>Free</option><option value=pro>Pro</option></select></label>
<button type=submit>Send</button></form>"""


def _html(text: str) -> Any:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="text/html")

    return page


class Site:
    """Two servers on loopback: the allowed site, and a 'private' one that must see nothing."""

    def __init__(self) -> None:
        self.private_hits: list[str] = []
        self.site_port = 0
        self.private_port = 0
        self._runners: list[web.AppRunner] = []

    async def start(self) -> None:
        site = web.Application()
        site.router.add_get("/", _html(JS_PAGE))
        site.router.add_get("/form", _html(FORM_PAGE))
        site.router.add_post("/submit", self._submit)
        site.router.add_get("/leak", self._leak)
        site.router.add_get("/to-private", self._redirect)
        site.router.add_get("/cookie", self._cookie)
        site.router.add_get("/file", self._file)
        private = web.Application()
        private.router.add_route("*", "/{tail:.*}", self._private)
        for app in (site, private):
            runner = web.AppRunner(app, shutdown_timeout=0.2)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            self._runners.append(runner)
        self.site_port = int(self._runners[0].addresses[0][1])
        self.private_port = int(self._runners[1].addresses[0][1])

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.site_port}"

    @property
    def private_url(self) -> str:
        return f"http://127.0.0.1:{self.private_port}"

    async def _submit(self, request: web.Request) -> web.Response:
        form = await request.post()
        page = (
            f"<title>Done</title><h1>Thanks, {form.get('name')}</h1><p>plan: {form.get('plan')}</p>"
        )
        return web.Response(text=page, content_type="text/html")

    async def _leak(self, request: web.Request) -> web.Response:
        page = f"""<title>Leak</title><p id=out>start</p>
<img src="{self.private_url}/img.png">
<script>
const out = document.getElementById('out');
for (const u of ['{self.private_url}/steal', 'http://169.254.169.254/latest/meta-data/',
                 'http://10.1.2.3/', 'http://[::1]:{self.private_port}/v6']) {{
  fetch(u).then(r => r.text()).then(t => out.textContent += ' GOT:' + t)
          .catch(() => out.textContent += ' blocked');
}}
</script>"""
        return web.Response(text=page, content_type="text/html")

    async def _redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"{self.private_url}/after-redirect")

    async def _cookie(self, request: web.Request) -> web.Response:
        seen = request.cookies.get("sid", "none")
        response = web.Response(
            text=f"<title>c</title><p>cookie {seen}</p>", content_type="text/html"
        )
        response.set_cookie("sid", "s3cret")
        return response

    async def _file(self, request: web.Request) -> web.Response:
        return web.Response(
            body=b"col1,col2\n1,2\n",
            content_type="text/csv",
            headers={"Content-Disposition": 'attachment; filename="report.csv"'},
        )

    async def _private(self, request: web.Request) -> web.Response:
        self.private_hits.append(request.path)
        return web.Response(text="private data")


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    served = Site()
    await served.start()
    yield served
    await served.stop()


@pytest.fixture
async def browser(site: Site) -> AsyncIterator[BrowserTool]:
    pool = BrowserPool(
        BrowserSettings(allow_private=(f"127.0.0.1:{site.site_port}",), timeout=30, max_pages=3)
    )
    yield BrowserTool(pool)
    await pool.aclose()


def context(tmp_path: Path, session: str = "agent:main:telegram:1:dm:42") -> ToolContext:
    return ToolContext(workspace=tmp_path, session_key=session)


async def test_a_page_built_by_javascript_is_read_through_its_snapshot(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    result = await browser.run({"action": "open", "url": site.url + "/"}, context(tmp_path))
    assert "Built by script" in result.content and "The answer is 42." in result.content
    assert "loading" not in result.content and "[ref=e" in result.content


async def test_a_form_is_filled_and_submitted_by_refs(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    ctx = context(tmp_path)
    opened = (await browser.run({"action": "open", "url": site.url + "/form"}, ctx)).content
    name_ref = _ref(opened, 'textbox "Name"')
    plan_ref = _ref(opened, 'combobox "Plan"')
    await browser.run({"action": "select", "ref": plan_ref, "value": "pro"}, ctx)
    done = await browser.run(
        {"action": "type", "ref": name_ref, "text": "Ada", "submit": True}, ctx
    )
    assert "Thanks, Ada" in done.content and "plan: pro" in done.content


async def test_private_addresses_get_nothing_whatever_the_page_tries(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    ctx = context(tmp_path)
    with pytest.raises(ToolError, match="refused"):
        await browser.run({"action": "open", "url": site.private_url + "/direct"}, ctx)
    with pytest.raises(ToolError, match="refused"):
        await browser.run({"action": "open", "url": "http://169.254.169.254/latest/"}, ctx)
    leak = await browser.run({"action": "open", "url": site.url + "/leak"}, ctx)
    assert "GOT:" not in leak.content and leak.content.count("blocked") == 4
    with pytest.raises(ToolError, match="refused: the page led to a private"):
        await browser.run({"action": "open", "url": site.url + "/to-private"}, ctx)
    assert site.private_hits == []


async def test_tabs_are_listed_picked_and_capped(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    ctx = context(tmp_path)
    await browser.run({"action": "open", "url": site.url + "/"}, ctx)
    await browser.run({"action": "open", "url": site.url + "/form", "new_tab": True}, ctx)
    tabs = (await browser.run({"action": "tabs"}, ctx)).content
    assert "tab 0: 'Built'" in tabs and "* tab 1: 'Sign up'" in tabs
    back = await browser.run({"action": "snapshot", "tab": 0}, ctx)
    assert "Built by script" in back.content
    await browser.run({"action": "open", "url": site.url + "/", "new_tab": True}, ctx)
    with pytest.raises(ToolError, match="max_pages"):
        await browser.run({"action": "open", "url": site.url + "/", "new_tab": True}, ctx)
    closed = await browser.run({"action": "close"}, ctx)
    assert "2 left" in closed.content


async def test_each_session_has_its_own_cookies_and_forget_drops_them(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    alice, bob = context(tmp_path, "agent:main:x:1:dm:a"), context(tmp_path, "agent:main:x:1:dm:b")
    await browser.run({"action": "open", "url": site.url + "/cookie"}, alice)
    again = await browser.run({"action": "open", "url": site.url + "/cookie"}, alice)
    assert "cookie s3cret" in again.content
    other = await browser.run({"action": "open", "url": site.url + "/cookie"}, bob)
    assert "cookie none" in other.content
    await browser.pool.forget(alice.session_key)
    fresh = await browser.run({"action": "open", "url": site.url + "/cookie"}, alice)
    assert "cookie none" in fresh.content


async def test_a_download_lands_in_the_workspace_inbox(
    tmp_path: Path, site: Site, browser: BrowserTool
) -> None:
    ctx = context(tmp_path)
    await browser.run({"action": "open", "url": site.url + "/"}, ctx)
    page_html = f'<a href="{site.url}/file" download>get</a>'
    session = await browser.pool.session(ctx.session_key, tmp_path)
    await session.page().set_content(page_html)
    link = _ref((await browser.run({"action": "snapshot"}, ctx)).content, 'link "get"')
    await browser.run({"action": "click", "ref": link}, ctx)
    saved = list((tmp_path / "inbox").rglob("report.csv"))
    for _ in range(50):
        if saved:
            break
        await browser.run({"action": "snapshot"}, ctx)
        saved = list((tmp_path / "inbox").rglob("report.csv"))
    assert saved and saved[0].read_bytes() == b"col1,col2\n1,2\n"


async def test_the_agent_sends_a_screenshot_to_the_telegram_chat(
    tmp_path: Path, site: Site
) -> None:
    async with FakeAnthropic() as model, FakeTelegram() as tg:
        overrides: dict[str, Any] = {
            "channels.telegram": {
                "enabled": True,
                "token": TOKEN,
                "base_url": tg.base_url,
                "allow_from": ["42"],
                "retry_backoff": 0.01,
            },
            "agent.browser": {"enabled": True, "allow_private": [f"127.0.0.1:{site.site_port}"]},
        }
        model.queue(
            Reply.tool_use([("browser", {"action": "open", "url": site.url + "/"})]),
            Reply.tool_use([("browser", {"action": "screenshot"})]),
        )

        def after_the_screenshot(body: dict[str, Any]) -> Reply:
            [(result, _)] = tool_results(body) or [("", False)]
            if " saved as " in result:  # send what the screenshot saved, as a person would ask
                where = result.split(" saved as ")[1].split(" ")[0]
                return Reply.tool_use([("send_file", {"path": where})])
            return Reply.text("Here it is.")

        model.default = after_the_screenshot
        daemon = Daemon(make_config(tmp_path, model.base_url, overrides))
        await daemon.start()
        try:
            tg.dm("what does my page say? show me")
            await tg.wait_for("sendMessage", 1, timeout=60)
        finally:
            await daemon.stop()
        [(opened, _)] = tool_results(model.requests[1])
        assert "Built by script" in opened
        images = [
            b for b in model.requests[2]["messages"][-1]["content"] if b["type"] == "tool_result"
        ]
        assert any(c.get("type") == "image" for c in images[0]["content"])
        [photo] = tg.calls("sendPhoto")
        assert photo.params["photo"].data.startswith(b"\x89PNG")


def _ref(snapshot: str, label: str) -> str:
    """The ref of the first element whose line holds `label`."""
    for line in snapshot.splitlines():
        if label in line and "[ref=" in line:
            return line.split("[ref=")[1].split("]")[0]
    raise AssertionError(f"no {label!r} in:\n{snapshot}")


async def test_doctor_says_the_browser_starts_or_why_not(tmp_path: Path) -> None:
    async with FakeAnthropic() as model:
        on = make_config(tmp_path, model.base_url, {"agent.browser": {"enabled": True}})
        check = await browser_check(on)
        assert check.ok and "starts" in check.line(), check.line()
        broken = {"agent.browser": {"enabled": True, "executable": str(tmp_path / "nochrome")}}
        check = await browser_check(make_config(tmp_path, model.base_url, broken))
        assert not check.ok and "did not start" in check.line() and "executable" in check.line()
        off = await browser_check(make_config(tmp_path, model.base_url))
        assert off.ok and "disabled" in off.line()
