"""`perch doctor`'s line about the browser tool: off, or Chromium starts and renders a page."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agents.tools.browser_pool import BrowserPool, find_chromium
from bot.config.schema import Config
from bot.operator.checks import Check
from bot.tools.belt import browser_pool

_PROBE_PAGE = "<title>perch</title><p>ok</p>"


async def browser_check(config: Config) -> Check:
    """Start the configured Chromium, render a page in a fresh context, close it again."""
    pool = browser_pool(config)
    if pool is None:
        return Check(True, "browser", "disabled: the agent has no browser tool")
    try:
        return await _probe(pool)
    finally:
        await pool.aclose()


async def _probe(pool: BrowserPool) -> Check:
    where = find_chromium(pool.settings.executable) or "Playwright's Chromium"
    try:
        with tempfile.TemporaryDirectory(prefix="perch-doctor-") as scratch:
            session = await pool.session("doctor", Path(scratch))
            page = await session.context.new_page()
            await page.set_content(_PROBE_PAGE)
            title = await page.title()
            browser = session.context.browser
            version = browser.version if browser is not None else "?"
    except Exception as exc:
        return Check(
            False,
            "browser",
            f"{where} did not start: {' '.join(str(exc).split())[:200]}",
            "install Debian's chromium (apt-get install chromium) or set agent.browser.executable",
        )
    if title != "perch":
        return Check(False, "browser", f"{where} started but did not render a page")
    return Check(True, "browser", f"Chromium {version} starts ({where}) in {pool.jail.describe()}")
