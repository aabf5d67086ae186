"""The dashboard under test: a daemon with `web:` on, a real headless Chromium to drive it.

`dashboard_overrides()` turns the dashboard on (a free loopback port, the test token) for
`tests.harness.running_daemon`. `start_chromium()` starts Debian's `chromium` through its
`chromedriver` (one browser per test module: `chromium_or_skip`), with a proxy that goes
nowhere so the browser can reach loopback only. `Browser` drives it from async tests: the
daemon runs on the test's event loop, so every WebDriver call runs in a thread and the loop
keeps serving the pages it asks for. Waits are WebDriver's bounded ones.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

TOKEN = "dashboard-test-token-0123456789"
CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"
WAIT_S = 10.0
NO_BROWSER = (
    "no chromium and chromedriver on this machine (apt-get install -y chromium chromium-driver; "
    ".ci/run installs them as root)"
)

T = TypeVar("T")


def dashboard_overrides(**extra: Any) -> dict[str, Any]:
    return {"web": {"enabled": True, "listen": "127.0.0.1:0", "token": TOKEN}, **extra}


def browser_paths() -> tuple[str, str] | None:
    browser = next((found for name in CHROMIUM if (found := shutil.which(name))), None)
    driver = shutil.which(DRIVER) or (
        "/usr/lib/chromium/chromedriver"
        if Path("/usr/lib/chromium/chromedriver").exists()
        else None
    )
    return (browser, driver) if browser and driver else None


def start_chromium(width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium (a WebDriver), or a skip saying what to install."""
    paths = browser_paths()
    if paths is None:
        pytest.skip(NO_BROWSER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    profile = tempfile.mkdtemp(prefix="perch-chromium-")
    for flag in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-sync",
        "--no-pings",
        "--proxy-server=http://127.0.0.1:9",  # nowhere: loopback is never proxied
        "--force-color-profile=srgb",
        "--hide-scrollbars",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)
    driver.set_page_load_timeout(WAIT_S * 2)
    driver.profile_dir = profile
    return driver


def stop_chromium(driver: Any) -> None:
    driver.quit()
    shutil.rmtree(getattr(driver, "profile_dir", ""), ignore_errors=True)


class Browser:
    """Async steps on a WebDriver at `base` (the dashboard's URL)."""

    def __init__(self, driver: Any, base: str) -> None:
        self.driver = driver
        self.base = base.rstrip("/")

    async def _do(self, step: Callable[[], T]) -> T:
        return await asyncio.to_thread(step)

    async def open(self, path: str) -> None:
        await self._do(lambda: self.driver.get(self.base + path))

    async def login(self, token: str = TOKEN, then: str = "/") -> None:
        await self.open(f"/login?next={then}")
        await self.fill("input[name=token]", token)
        await self.click("form[action='/login'] button")
        await self.wait_path(then)

    async def fill(self, css: str, text: str) -> None:
        def fill() -> None:
            field = self.find(css)
            field.clear()
            field.send_keys(text)

        await self._do(fill)

    async def select(self, css: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        await self._do(lambda: Select(self.find(css)).select_by_value(value))

    async def click(self, css: str) -> None:
        await self._do(lambda: self.find(css).click())

    async def click_and_confirm(self, css: str) -> None:
        """Click a button that asks first (`data-confirm`) and say yes."""
        from selenium.webdriver.support import expected_conditions

        def click() -> None:
            self.find(css).click()
            self._wait().until(expected_conditions.alert_is_present())
            self.driver.switch_to.alert.accept()

        await self._do(click)

    def _wait(self) -> Any:
        """A wait that reads the page again when it changed under it (a stale element: the
        page was still loading or navigating)."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(
            self.driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,)
        )

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions

        return self._wait().until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
        )

    async def texts(self, css: str) -> list[str]:
        from selenium.webdriver.common.by import By

        def read() -> list[str]:
            return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

        return await self._do(read)

    async def count(self, css: str) -> int:
        return len(await self.texts(css))

    async def text(self, css: str = "main") -> str:
        return await self._do(lambda: self.find(css).text)

    async def wait_text(self, css: str, wanted: str) -> str:
        """The text of `css` once it contains `wanted` (within the wait)."""
        from selenium.webdriver.common.by import By

        def present(driver: Any) -> str | bool:
            found = [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]
            joined = "\n".join(found)
            return joined if wanted in joined else False

        return str(await self._do(lambda: self._wait().until(present)))

    async def wait_path(self, path: str) -> None:

        def there(driver: Any) -> bool:
            return str(driver.current_url).removeprefix(self.base).split("#")[0] == path

        await self._do(lambda: self._wait().until(there))

    async def path(self) -> str:
        return str(await self._do(lambda: self.driver.current_url)).removeprefix(self.base)

    async def source(self) -> str:
        return str(await self._do(lambda: self.driver.page_source))

    async def run_js(self, script: str, *args: Any) -> Any:
        return await self._do(lambda: self.driver.execute_script(script, *args))

    async def cookies(self) -> list[dict[str, Any]]:
        return list(await self._do(self.driver.get_cookies))

    async def forget(self) -> None:
        """Log out the hard way: drop every cookie of the current site."""
        await self._do(self.driver.delete_all_cookies)

    async def screenshot(self, path: Path, width: int, *, phone: bool = False) -> None:
        """A PNG of the whole page, `width` CSS pixels wide (`phone`: at twice the density,
        as a phone's screen is)."""

        def shoot() -> None:
            def emulate(height: int) -> None:
                self.driver.execute_cdp_cmd(
                    "Emulation.setDeviceMetricsOverride",
                    {
                        "width": width,
                        "height": height,
                        "deviceScaleFactor": 2 if phone else 1,
                        "mobile": phone,
                    },
                )

            emulate(900)
            full = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
            emulate(max(full, 400))
            self.driver.save_screenshot(str(path))
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

        await self._do(shoot)
