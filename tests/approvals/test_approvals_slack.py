"""Approvals on Slack end to end: slack-bolt against the fake Web API, the whole daemon, the
fake model running `exec`. The owner's DM gets a Block Kit card; a tap is a `block_actions`
interactive payload, over Socket Mode (an `interactive` envelope) and over HTTP mode (a
signed `payload=` form post); another user's tap is refused with a note only they see."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.daemon import Daemon
from tests.approvals.support import (
    audit,
    exec_settings,
    last_tool_result,
    script_exec,
    workspace_file,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.slack import FakeSlack, SlackCall, event_payload, sign
from tests.harness import make_config

pytestmark = pytest.mark.timeout(300)
WAIT = 60
OWNER, STRANGER = "UALICE", "UBOB"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def dm(sl: FakeSlack, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "D100",
        "channel_type": "im",
        "user": OWNER,
        "text": text,
        "ts": sl.new_ts(),
    }


async def next_card(sl: FakeSlack, seen: int) -> SlackCall:
    def cards() -> list[SlackCall]:
        return [c for c in sl.calls_to("chat.postMessage") if c.params.get("blocks")]

    async with asyncio.timeout(WAIT):
        while len(cards()) <= seen:
            await sl.wait_for("chat.postMessage", len(sl.calls_to("chat.postMessage")) + 1, WAIT)
    return cards()[seen]


def slack_settings(sl: FakeSlack, **mode: Any) -> dict[str, Any]:
    return {
        "channels.slack": {
            "enabled": True,
            "bot_token": "xoxb-test",
            "app_token": "xapp-test",
            "base_url": sl.base_url,
            "allow_from": [OWNER, STRANGER],
            **mode,
        },
        **exec_settings(),
    }


async def test_buttons_over_socket_mode(
    tmp_path: Path, model: FakeAnthropic, slack: FakeSlack
) -> None:
    first, second = workspace_file(tmp_path, "a.txt"), workspace_file(tmp_path, "b.txt")
    daemon = Daemon(make_config(tmp_path, model.base_url, slack_settings(slack)))
    await daemon.start()
    try:
        await slack.wait_connections(1, WAIT)
        script_exec(model, "rm a.txt")
        await slack.push_event(dm(slack, "delete a.txt"))
        card = await next_card(slack, 0)
        assert card.params["channel"] == "D100" and "rm a.txt" in card.params["text"]
        await slack.push_action(slack.block_actions(card, "Deny", STRANGER))
        [note] = await slack.wait_for("chat.postEphemeral", 1, WAIT)
        assert note.params["user"] == STRANGER and "Only the approver" in note.params["text"]
        assert first.exists()
        await slack.push_action(slack.block_actions(card, "Approve", OWNER))
        await model.wait_requests(2, timeout=WAIT)
        assert not first.exists()
        assert last_tool_result(model).startswith("[approved by the owner]")
        updates = await slack.wait_for("chat.update", 1, WAIT)
        assert any("Approved by UALICE" in str(u.params.get("text")) for u in updates)

        await slack.wait_for("chat.postMessage", 2, WAIT)  # "done"
        script_exec(model, "rm b.txt")
        await slack.push_event(dm(slack, "and b.txt"))
        card = await next_card(slack, 1)
        await slack.push_action(slack.block_actions(card, "Deny", OWNER))
        await model.wait_requests(4, timeout=WAIT)
        assert second.exists() and "Denied by the owner" in last_tool_result(model)
        rows = await audit(daemon)
        assert [(r.status, r.decided_by) for r in rows] == [
            ("approved", "slack:UALICE"),
            ("denied", "slack:UALICE"),
        ]
    finally:
        await daemon.stop()


async def test_buttons_over_http_mode(
    tmp_path: Path, model: FakeAnthropic, slack: FakeSlack
) -> None:
    target = workspace_file(tmp_path, "a.txt")
    http = {"mode": "http", "app_token": "", "signing_secret": "s3cret", "http_port": 0}
    daemon = Daemon(make_config(tmp_path, model.base_url, slack_settings(slack, **http)))
    await daemon.start()
    try:
        url = daemon.channels["slack"].http_url  # type: ignore[attr-defined]
        script_exec(model, "rm a.txt")
        async with aiohttp.ClientSession() as session:
            body = json.dumps(event_payload(dm(slack, "delete a.txt"))).encode()
            async with session.post(url, data=body, headers=sign("s3cret", body)) as response:
                assert response.status == 200
            card = await next_card(slack, 0)
            payload = json.dumps(slack.block_actions(card, "Approve", OWNER))
            form = urllib.parse.urlencode({"payload": payload}).encode()
            forged = {**sign("wrong", form), "Content-Type": "application/x-www-form-urlencoded"}
            async with session.post(url, data=form, headers=forged) as response:
                assert response.status == 401  # every inbound webhook is signature-checked
            signed = {**sign("s3cret", form), "Content-Type": "application/x-www-form-urlencoded"}
            async with session.post(url, data=form, headers=signed) as response:
                assert response.status == 200
        await model.wait_requests(2, timeout=WAIT)
        assert not target.exists()
        [row] = await audit(daemon)
        assert (row.status, row.decided_by) == ("approved", "slack:UALICE")
    finally:
        await daemon.stop()
