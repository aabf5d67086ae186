"""Signed webhooks end to end: aiohttp posts as GitHub (and as a `perch`-signed sender
would) to `POST /hooks/<name>` of the whole daemon, whose agent answers into a chat of the
fake Telegram Bot API. A wrong or missing signature and a replayed perch signature run
nothing; a repeated delivery id runs once; the rate per endpoint holds."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.daemon import Daemon
from bot.web.hook_checks import sign
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config

pytestmark = pytest.mark.timeout(180)

GITHUB_SECRET = "github-secret-0123456789"
PERCH_SECRET = "perch-secret-0123456789ab"
GROUP = "-1001234567890"
DASHBOARD_TOKEN = "dashboard-token-0123456789"
PUSH = {
    "ref": "refs/heads/main",
    "repository": {"full_name": "ann/perch"},
    "pusher": {"name": "ann"},
}


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        server.default = lambda body: Reply.text("summary: " + last_user_text(body)[-60:])
        yield server


@pytest.fixture
async def setup(
    tmp_path: Path, model: FakeAnthropic
) -> AsyncIterator[tuple[Daemon, FakeTelegram, str]]:
    async with FakeTelegram() as tg:
        config = make_config(
            tmp_path,
            model.base_url,
            {
                "channels.telegram": {
                    "enabled": True,
                    "token": TOKEN,
                    "base_url": tg.base_url,
                    "allow_from": ["42"],
                    "groups": [GROUP],
                },
                "agents": [{"id": "ops"}],
                "web": {
                    "enabled": True,
                    "listen": "127.0.0.1:0",
                    "token": DASHBOARD_TOKEN,
                },
                "hooks": {
                    "enabled": True,
                    "endpoints": {
                        "github": {
                            "secret": GITHUB_SECRET,
                            "signature": "github",
                            "message": "Push to {json.repository.full_name} by {json.pusher.name} ({headers.X-GitHub-Event})",
                            "deliver": f"telegram:group:{GROUP}",
                        },
                        "alerts": {
                            "secret": PERCH_SECRET,
                            "signature": "perch",
                            "session": "alerts",
                            "agent": "ops",
                            "per_minute": 4,
                        },
                    },
                },
            },
        )
        daemon = Daemon(config)
        await daemon.start()
        try:
            assert daemon.parts is not None and daemon.parts.web is not None
            yield daemon, tg, daemon.parts.web.url.rstrip("/")
        finally:
            await daemon.stop()


def github_headers(body: bytes, delivery: str, secret: str = GITHUB_SECRET) -> dict[str, str]:
    return {
        "X-Hub-Signature-256": sign(secret, body),
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "Content-Type": "application/json",
    }


async def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
        return r.status, json.loads(await r.text())


async def test_a_github_signed_webhook_makes_the_agent_post_to_a_chat_once(
    setup: tuple[Daemon, FakeTelegram, str], model: FakeAnthropic
) -> None:
    daemon, tg, base = setup
    body = json.dumps(PUSH).encode()
    status, answer = await post(f"{base}/hooks/github", body, github_headers(body, "d-1"))
    assert status == 202 and answer["status"] == "accepted" and answer["id"]
    await tg.wait_for("sendMessage", 1, timeout=60)
    sent = tg.calls("sendMessage")[-1]
    assert str(sent.params["chat_id"]) == GROUP
    assert "Push to ann/perch by ann (push)" in sent.params["text"]

    # GitHub redelivers the same delivery: it runs once.
    status, again = await post(f"{base}/hooks/github", body, github_headers(body, "d-1"))
    assert status == 200 and again["status"] == "duplicate"
    await daemon.gateway.wait_idle()  # type: ignore[union-attr]
    assert len(model.requests) == 1


async def test_a_wrong_or_missing_signature_is_401_and_runs_nothing(
    setup: tuple[Daemon, FakeTelegram, str], model: FakeAnthropic
) -> None:
    _daemon, _tg, base = setup
    body = json.dumps(PUSH).encode()
    wrong = github_headers(body, "d-2", secret="not-the-secret-0123456789")
    assert (await post(f"{base}/hooks/github", body, wrong))[0] == 401
    missing = {"X-GitHub-Delivery": "d-3"}
    assert (await post(f"{base}/hooks/github", body, missing))[0] == 401
    tampered = github_headers(body, "d-4")
    assert (await post(f"{base}/hooks/github", body + b" ", tampered))[0] == 401
    assert (await post(f"{base}/hooks/nope", body, github_headers(body, "d-5")))[0] == 404
    # The dashboard's token is not a webhook's credential, nor is the webhook's path its.
    assert model.requests == []


async def test_a_replayed_perch_signature_runs_nothing_and_old_ones_are_refused(
    setup: tuple[Daemon, FakeTelegram, str], model: FakeAnthropic
) -> None:
    daemon, _tg, base = setup
    body = b'{"alert": "disk 91% full"}'
    stamp = str(int(time.time()))
    headers = {"X-Perch-Timestamp": stamp, "X-Perch-Signature": sign(PERCH_SECRET, body, stamp)}
    status, answer = await post(f"{base}/hooks/alerts", body, headers)
    assert status == 202 and answer["session"] == "agent:ops:hook:alerts:dm:alerts"
    await model.wait_requests(1, timeout=60)
    status, _ = await post(f"{base}/hooks/alerts", body, headers)  # the same request again
    assert status == 409
    old = str(int(time.time()) - 600)
    stale = {"X-Perch-Timestamp": old, "X-Perch-Signature": sign(PERCH_SECRET, body, old)}
    assert (await post(f"{base}/hooks/alerts", body, stale))[0] == 401
    # A fresh timestamp under the old signature does not pass either.
    moved = {
        "X-Perch-Timestamp": str(int(time.time()) + 1),
        "X-Perch-Signature": headers["X-Perch-Signature"],
    }
    assert (await post(f"{base}/hooks/alerts", body, moved))[0] == 401
    await daemon.gateway.wait_idle()  # type: ignore[union-attr]
    assert len(model.requests) == 1
    # The dashboard shows the session with its agent.
    auth = {"Authorization": f"Bearer {DASHBOARD_TOKEN}"}
    async with aiohttp.ClientSession() as http, http.get(f"{base}/sessions", headers=auth) as r:
        page = await r.text()
    assert r.status == 200 and "agent:ops:hook:alerts:dm:alerts" in page
    assert "<td>ops</td>" in page


async def test_each_endpoint_has_its_rate(
    setup: tuple[Daemon, FakeTelegram, str], model: FakeAnthropic
) -> None:
    _daemon, _tg, base = setup
    codes = []
    for n in range(5):  # alerts: 4 a minute, whatever they carry
        body = f'{{"n": {n}}}'.encode()
        stamp = str(int(time.time()))
        headers = {"X-Perch-Timestamp": stamp, "X-Perch-Signature": sign(PERCH_SECRET, body, stamp)}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{base}/hooks/alerts", data=body, headers=headers) as r,
        ):
            codes.append(r.status)
            retry = r.headers.get("Retry-After")
    assert codes == [202, 202, 202, 202, 429] and retry is not None
