"""A webhook's delivery id is kept in the store: the same delivery runs once across a
restart of the daemon, on SQLite and on PostgreSQL, and sent to two instances sharing a
PostgreSQL store at once it runs on one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.daemon import Daemon
from bot.web.hook_checks import sign
from tests.fakes.anthropic import FakeAnthropic
from tests.harness import make_config, running_daemon
from tests.store_backends import Backend

pytestmark = pytest.mark.timeout(180)

SECRET = "github-secret-0123456789"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def deliver(daemon: Daemon, delivery: str) -> tuple[int, dict[str, Any]]:
    assert daemon.parts is not None and daemon.parts.web is not None
    body = b'{"action": "opened"}'
    headers = {"X-Hub-Signature-256": sign(SECRET, body), "X-GitHub-Delivery": delivery}
    url = daemon.parts.web.url + "hooks/github"
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status, json.loads(await r.text())


async def test_a_delivery_id_runs_once_across_a_restart(
    tmp_path: Path, model: FakeAnthropic, backend: Backend
) -> None:
    store: dict[str, Any] = (
        {"url": backend.where} if backend.kind == "postgresql" else {"path": str(backend.where)}
    )
    config = make_config(
        tmp_path,
        model.base_url,
        {
            "store": store,
            "web": {"enabled": False, "listen": "127.0.0.1:0"},
            "hooks": {
                "enabled": True,
                "endpoints": {"github": {"secret": SECRET, "signature": "github"}},
            },
        },
    )
    first = Daemon(config)
    await first.start()
    try:
        assert (await deliver(first, "delivery-7"))[0] == 202
        await model.wait_requests(1, timeout=60)
        await first.gateway.wait_idle()  # type: ignore[union-attr]
    finally:
        await first.stop()
    second = Daemon(config)
    await second.start()
    try:
        status, answer = await deliver(second, "delivery-7")
        assert (status, answer["status"]) == (200, "duplicate")
        assert (await deliver(second, "delivery-8"))[0] == 202
        await model.wait_requests(2, timeout=60)
        await second.gateway.wait_idle()  # type: ignore[union-attr]
    finally:
        await second.stop()
    assert len(model.requests) == 2


async def test_a_delivery_sent_to_two_instances_at_once_runs_once(
    tmp_path: Path, model: FakeAnthropic, pg_url: str
) -> None:
    settings = {
        "store.url": pg_url,
        "web": {"enabled": False, "listen": "127.0.0.1:0"},
        "hooks": {
            "enabled": True,
            "endpoints": {"github": {"secret": SECRET, "signature": "github"}},
        },
    }
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
    async with (
        running_daemon(tmp_path / "one", model, {}, settings) as one,
        running_daemon(tmp_path / "two", model, {}, settings) as two,
    ):
        answers = await asyncio.gather(deliver(one, "same-1"), deliver(two, "same-1"))
        assert sorted(status for status, _ in answers) == [200, 202]
        await model.wait_requests(1, timeout=60)
        for daemon in (one, two):
            await daemon.gateway.wait_idle()  # type: ignore[union-attr]
    assert len(model.requests) == 1
