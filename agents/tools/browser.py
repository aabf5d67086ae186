"""The `browser` tool: a real headless Chromium the agent drives, one action per call.

Actions: `open` (a `url`; `new_tab` opens it beside the others), `snapshot` (the page as an
accessibility tree, each element the agent can act on numbered `[ref=eN]`), `click`, `type`
(`text`, `submit` to press Enter after), `select` (`value`) and `press` (`key`, optionally on a
`ref`), `screenshot` (an image the model sees, saved in the workspace so `send_file` can show
it in the chat), `pdf` (saved in the workspace), `tabs` (list; `tab` picks the current one for
any action), `close` (the current tab). Every action after which the page may have changed
answers with the new snapshot. The pages' network goes through Perch's SSRF guard
(`browser_guard`), so neither the model nor a page's scripts reach a private address; files
the page downloads land in the workspace inbox.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.model import image_block
from agents.tools.base import ToolContext, ToolError, ToolResult
from agents.tools.browser_guard import check_url
from agents.tools.browser_pool import BrowserPool, SessionBrowser
from agents.workspace_files import create_new

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

MAX_SNAPSHOT_CHARS = 24_000
_SETTLE_S = 2.0  # after an action, wait this long at most for the page's requests to end
_OUTPUT = "browser"  # where screenshots and PDFs go in the workspace
_numbers = itertools.count(1)

ACTIONS = (
    "open",
    "snapshot",
    "click",
    "type",
    "select",
    "press",
    "screenshot",
    "pdf",
    "tabs",
    "close",
)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "url": {"type": "string", "description": "open: the address"},
        "ref": {"type": "string", "description": "the element, e.g. e12, from a snapshot"},
        "text": {"type": "string", "description": "type: the text to type"},
        "value": {"type": "string", "description": "select: the option's value or label"},
        "key": {"type": "string", "description": "press: e.g. Enter, Escape, ArrowDown"},
        "submit": {"type": "boolean", "description": "type: press Enter afterwards"},
        "new_tab": {"type": "boolean", "description": "open: in a new tab"},
        "tab": {"type": "integer", "description": "the tab to act on (from 'tabs')"},
        "full_page": {"type": "boolean", "description": "screenshot: the whole page"},
    },
    "required": ["action"],
}


class BrowserTool:
    name = "browser"
    description = (
        "Drive a real web browser (Chromium) for pages that need JavaScript, logins or forms. "
        "Start with action 'open' and a url; the answer is the page as a tree of elements, "
        "each one you can act on marked [ref=eN]. Then 'click' a ref, 'type' text into a ref "
        "(submit: true presses Enter), 'select' a value in a ref, 'press' a key, 'snapshot' "
        "to read the page again, 'screenshot' to see it (send it to the chat with send_file "
        "and the path it names), 'pdf' to save it, 'tabs' to list tabs (tab: N acts on tab N), "
        "'close' to close the current tab. Private and local addresses cannot be reached."
    )

    def __init__(self, pool: BrowserPool) -> None:
        self.pool = pool
        self.input_schema: dict[str, Any] = SCHEMA

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action = args.get("action")
        if action not in ACTIONS:
            raise ToolError(f"browser needs 'action', one of: {', '.join(ACTIONS)}")
        session = await self.pool.session(ctx.session_key, ctx.workspace)
        if isinstance(args.get("tab"), int) and action != "open":
            _pick_tab(session, args["tab"])
        timeout = self.pool.settings.timeout
        limits_before = self.pool.limit_counts()
        try:
            async with asyncio.timeout(timeout):
                return await self._act(str(action), args, ctx, session)
        except TimeoutError:
            raise ToolError(f"browser {action} took longer than {timeout:g} s") from None
        except ToolError:
            raise
        except Exception as exc:
            if "ERR_BLOCKED_BY_CLIENT" in str(exc):
                raise ToolError(
                    f"browser {action} refused: the page led to a private or local address "
                    "(only public hosts, and those in agent.browser.allow_private, are reached)"
                ) from None
            limit = self.pool.limit_hit_since(limits_before)
            if limit is not None:
                raise ToolError(f"browser {action} failed: the browser ran {limit}") from None
            raise ToolError(f"browser {action} failed: {_one_line(exc)}") from None

    async def _act(
        self, action: str, args: dict[str, Any], ctx: ToolContext, session: SessionBrowser
    ) -> ToolResult:
        if action == "open":
            return await self._open(args, ctx, session)
        if action == "tabs":
            return ToolResult(await _tabs(session))
        if action == "close":
            page = session.page()
            await page.close()
            session.pages.remove(page)
            session.current = max(0, min(session.current, len(session.pages) - 1))
            return ToolResult(
                "tab closed" + (f"; {len(session.pages)} left" if session.pages else "")
            )
        page = session.page()
        if action == "snapshot":
            return ToolResult(await snapshot(page, session))
        if action == "screenshot":
            data = await page.screenshot(full_page=bool(args.get("full_page")), type="png")
            where = _save(ctx.workspace, "screenshot", "png", data)
            image = image_block("image/png", base64.b64encode(data).decode())
            return ToolResult(
                f"Screenshot of {page.url} saved as {where} (send it with send_file).",
                images=(image,),
            )
        if action == "pdf":
            data = await page.pdf()
            where = _save(ctx.workspace, "page", "pdf", data)
            return ToolResult(f"PDF of {page.url} saved as {where} ({len(data):,} bytes).")
        if action == "press" and not args.get("ref"):
            await page.keyboard.press(_required(args, "key"))
        else:
            target = _element(page, args)
            if action == "click":
                await target.click()
            elif action == "type":
                await target.fill(_required(args, "text"))
                if args.get("submit"):
                    await target.press("Enter")
            elif action == "select":
                await target.select_option(_required(args, "value"))
            else:
                await target.press(_required(args, "key"))
        await _settle(session.page())
        return ToolResult(await snapshot(session.page(), session))

    async def _open(
        self, args: dict[str, Any], ctx: ToolContext, session: SessionBrowser
    ) -> ToolResult:
        url = _required(args, "url").strip()
        if "://" not in url:
            url = "https://" + url
        await check_url(url, self.pool.allow)  # a clear refusal before the page is touched
        if args.get("new_tab") or not session.pages:
            page = await self.pool.new_page(ctx.session_key, session)
        else:
            page = session.page()
        response = await page.goto(url, wait_until="domcontentloaded")
        await _settle(page)
        status = (
            f" (HTTP {response.status})" if response is not None and response.status >= 400 else ""
        )
        return ToolResult(f"Opened {page.url}{status}\n" + await snapshot(page, session))


async def snapshot(page: Page, session: SessionBrowser) -> str:
    """The page as the model reads it: title, address, tab count, the accessibility tree with
    refs (cut to `MAX_SNAPSHOT_CHARS`), and downloads since the last snapshot."""
    tree = await page.aria_snapshot(mode="ai")
    if len(tree) > MAX_SNAPSHOT_CHARS:
        tree = (
            tree[:MAX_SNAPSHOT_CHARS]
            + "\n[... snapshot cut: use find-in-page by clicking or scrolling]"
        )
    head = f"Page: {await page.title()!r} at {page.url}"
    if len(session.pages) > 1:
        head += f" (tab {session.pages.index(page)} of {len(session.pages)})"
    saved = ""
    if session.downloads:
        saved = "\nDownloaded: " + ", ".join(session.downloads)
        session.downloads.clear()
    return f"{head}\n{tree}{saved}"


async def _tabs(session: SessionBrowser) -> str:
    if not session.pages:
        return "no tabs are open"
    lines = []
    for index, page in enumerate(session.pages):
        mark = "*" if index == session.current else " "
        lines.append(f"{mark} tab {index}: {await page.title()!r} {page.url}")
    return "\n".join(lines)


def _pick_tab(session: SessionBrowser, index: int) -> None:
    if not 0 <= index < len(session.pages):
        raise ToolError(f"there is no tab {index}; 'tabs' lists {len(session.pages)}")
    session.current = index


def _element(page: Page, args: dict[str, Any]) -> Locator:
    ref = _required(args, "ref").strip().strip("[]").removeprefix("ref=")
    if not ref.startswith("e") or not ref[1:].isdigit():
        raise ToolError(f"ref {ref!r} is not an element reference such as e12 (see 'snapshot')")
    return page.locator(f"aria-ref={ref}")


def _required(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise ToolError(f"browser {args.get('action')} needs '{name}'")
    return value


async def _settle(page: Page) -> None:
    """Give the page's scripts and requests a moment (bounded) to finish what the action began."""
    with contextlib.suppress(Exception):
        await page.wait_for_load_state("networkidle", timeout=_SETTLE_S * 1000)


def _save(workspace: Path, stem: str, suffix: str, data: bytes) -> str:
    """Save `data` under `browser/` in the workspace with a new name; the path shown."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for _ in range(1000):
        name = f"{stem}-{stamp}-{next(_numbers)}.{suffix}"
        if create_new(workspace, (_OUTPUT, name), data):
            return f"{_OUTPUT}/{name}"
    raise ToolError("could not find a free file name under browser/")


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
