"""An MCP server's `env` values never reach the log, whatever the variable is called: a
server that prints its `GITHUB_PAT` on stderr shows `[REDACTED]` in perch.log, on the
dashboard's Logs page and in its live stream (a real daemon, the real stdio test server)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.process.logs import setup_logging
from tests.dashboard_support import TOKEN, dashboard_overrides
from tests.fakes.anthropic import FakeAnthropic
from tests.harness import make_config, running_daemon
from tests.mcp_servers.running import stdio_entry
from tests.model_backends import provider_settings
from tests.waiting import eventually

PAT = "pat_Zk81mQ3v9LwQ2e"  # no known token shape: only the config says it is a secret
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
def restore_logging() -> AsyncIterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield None
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


async def test_an_mcp_servers_env_value_is_redacted_in_the_log_and_the_dashboard(
    tmp_path: Path, fake: FakeAnthropic, restore_logging: None
) -> None:
    env = {"GITHUB_PAT": PAT, "PERCH_TEST_STDERR": f"starting with token {PAT}\n"}
    overrides = {**dashboard_overrides(), "mcp.servers": {"gh": stdio_entry("gh", env=env)}}
    log_file = tmp_path / "perch.log"
    model, providers = provider_settings(fake)
    settings = {"agent.model": model, "providers": providers, **overrides}
    secrets = make_config(tmp_path, fake.base_url, settings).secret_values()
    setup_logging("INFO", "text", secrets, file=log_file)  # as `perch run` does
    async with running_daemon(tmp_path, fake, {}, overrides) as daemon:
        url = daemon.parts.web.url
        await eventually(lambda: "starting with token" in log_file.read_text(), 60)
        from_the_top = {**BEARER, "Last-Event-ID": "999999"}
        async with aiohttp.ClientSession() as client:
            async with client.get(url + "logs/stream", headers=from_the_top) as stream:
                streamed = ""
                async with asyncio.timeout(30):
                    while "starting with token" not in streamed:
                        streamed += (await stream.content.readline()).decode()
            async with client.get(url + "logs", headers=BEARER) as page:
                shown = await page.text()
    logged = log_file.read_text()
    assert "starting with token [REDACTED]" in logged
    assert "starting with token [REDACTED]" in shown
    line = next(s for s in streamed.splitlines() if "starting with token" in s)
    assert json.loads(line.removeprefix("data: "))["text"].endswith("token [REDACTED]")
    for output in (logged, shown, streamed):
        assert PAT not in output
