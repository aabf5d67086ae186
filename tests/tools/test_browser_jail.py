"""The browser under exec's limits: Chromium in its own process group and, where this host lets
Perch manage cgroups, in a cgroup of its own holding every process it forks (the driver that
launched it stays outside); a page that eats memory past `agent.exec.memory_mb` is killed,
the model is told why, the next page opens, and closing the browser leaves no process and no
cgroup behind."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from agents.tools.base import ToolContext, ToolError
from agents.tools.browser import BrowserTool
from agents.tools.browser_pool import BrowserPool, BrowserSettings, find_chromium
from agents.tools.cgroups import CgroupHome

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        find_chromium(None) is None or shutil.which("chromium") is None,
        reason="no Chromium on this machine (.ci/run installs Debian's chromium)",
    ),
]

PLAIN = "<!doctype html><title>Plain</title><p>a quiet page</p>"
# Typed arrays live outside V8's heap, so only the cgroup stops this page.
HOG = """<!doctype html><title>Hog</title><p id=out>eating</p><script>
const kept = [];
for (let i = 0; i < 200; i++) kept.push(new Uint8Array(25e6).fill(i % 250 + 1));
document.getElementById('out').textContent = 'ate ' + kept.length;
</script>"""
MEMORY_MB = 700


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _tree(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in _children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
async def site() -> AsyncIterator[str]:
    app = web.Application()
    for path, text in (("/", PLAIN), ("/hog", HOG)):

        async def page(request: web.Request, text: str = text) -> web.Response:
            return web.Response(text=text, content_type="text/html")

        app.router.add_get(path, page)
    runner = web.AppRunner(app, shutdown_timeout=0.2)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


@contextlib.asynccontextmanager
async def browsing(
    site: str, home: CgroupHome | None, workspace: Path
) -> AsyncIterator[tuple[BrowserPool, BrowserTool, ToolContext]]:
    """A pool under exec's limits (allowed to reach `site`), its tool and a session's context;
    the pool is closed after."""
    port = site.rsplit(":", 1)[1]
    settings = BrowserSettings(
        allow_private=(f"127.0.0.1:{port}",),
        timeout=60,
        memory_bytes=MEMORY_MB * 2**20,
        processes=1024,
    )
    pool = BrowserPool(settings, home)
    try:
        ctx = ToolContext(workspace=workspace, session_key="agent:main:telegram:1:dm:42")
        yield pool, BrowserTool(pool), ctx
    finally:
        await pool.aclose()


def _home() -> CgroupHome:
    home = CgroupHome.find()
    if home is None:
        pytest.skip("no cgroup can be managed here (not delegated, or no pids/memory controller)")
    return home


async def test_chromium_runs_in_its_own_process_group_without_a_cgroup(
    tmp_path: Path, site: str
) -> None:
    async with browsing(site, None, tmp_path) as (pool, tool, ctx):
        opened = await tool.run({"action": "open", "url": site + "/"}, ctx)
        assert "a quiet page" in opened.content
        assert pool._driver is not None
        assert _children(pool._driver), "Chromium is not a child of Playwright's driver"
        ours = os.getpgid(0)
        for pid in _tree(pool._driver) - {pool._driver}:
            assert os.getpgid(pid) != ours
        assert pool.jail.group is None
        assert "no cgroup to manage here" in pool.jail.describe()


async def test_every_chromium_process_is_in_the_browsers_cgroup_and_none_outlives_it(
    tmp_path: Path, site: str
) -> None:
    async with browsing(site, _home(), tmp_path) as (pool, tool, ctx):
        await tool.run({"action": "open", "url": site + "/"}, ctx)
        await tool.run({"action": "open", "url": site + "/", "new_tab": True}, ctx)
        group, driver = pool.jail.group, pool._driver
        assert group is not None and driver is not None
        chromium = _tree(driver) - {driver}
        assert len(chromium) >= 3  # the browser, its zygotes, renderers and helpers
        assert chromium <= group.pids()
        assert driver not in group.pids()  # moved in for the launch only
        assert group.memory_bytes == MEMORY_MB * 2**20 and group.processes > 0
    assert not any(d.exists() for d in group.dirs)
    assert not [pid for pid in chromium if _alive(pid)]


async def test_a_page_past_the_memory_limit_is_killed_and_the_browser_goes_on(
    tmp_path: Path, site: str
) -> None:
    async with browsing(site, _home(), tmp_path) as (pool, tool, ctx):
        await tool.run({"action": "open", "url": site + "/"}, ctx)
        with pytest.raises(ToolError, match=f"out of memory: agent.exec.memory_mb is {MEMORY_MB}"):
            await tool.run({"action": "open", "url": site + "/hog", "new_tab": True}, ctx)
        tabs = (await tool.run({"action": "tabs"}, ctx)).content
        assert "Plain" in tabs and "Hog" not in tabs  # the crashed tab left the session
        assert pool.limit_hit_since((0, 0)) is not None
        # a later failure is not blamed on the limit met before it
        assert pool.limit_hit_since(pool.limit_counts()) is None
        again = await tool.run({"action": "open", "url": site + "/"}, ctx)
        assert "a quiet page" in again.content
