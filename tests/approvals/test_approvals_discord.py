"""Approvals on Discord end to end: discord.py against the fake Discord (REST and gateway),
the whole daemon, the fake model running `exec`. The owner's DM gets a message with buttons
(message components); a tap is a component interaction, acknowledged at once; another
user's tap gets an ephemeral note; the card is edited to the decision, its buttons gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.daemon import Daemon
from tests.approvals.support import (
    audit,
    exec_settings,
    last_tool_result,
    script_exec,
    workspace_file,
)
from tests.fakes import discord_payloads as p
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.discord import ALICE, BOB, FakeDiscord, Posted
from tests.harness import make_config

pytestmark = pytest.mark.timeout(300)
WAIT = 60
CALLBACK = "POST /interactions/{interaction_id}/{token}/callback"
FOLLOWUP = "POST /webhooks/{application_id}/{token}"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def next_card(fake: FakeDiscord, channel_id: str, seen: int) -> Posted:
    def cards() -> list[Posted]:
        return [m for m in fake.posted_in(channel_id) if m.buttons or m.edits]

    await fake.wait(lambda: len(cards()) > seen, WAIT)
    return cards()[seen]


async def test_buttons_on_discord(tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord) -> None:
    target = workspace_file(tmp_path, "a.txt")
    settings = {
        "channels.discord": {
            "enabled": True,
            "token": p.TOKEN,
            "api_base": fake.api_base,
            "allow_from": [ALICE["id"], BOB["id"]],
            "guild_ready_timeout": 0.05,
        },
        **exec_settings(),
    }
    daemon = Daemon(make_config(tmp_path, model.base_url, settings))
    await daemon.start()
    try:
        await fake.gateway.wait(lambda: fake.gateway.connected, WAIT)
        script_exec(model, "rm a.txt")
        sent = await fake.dm("delete a.txt")
        card = await next_card(fake, sent["channel_id"], 0)
        assert "rm a.txt" in card.content
        assert list(card.buttons) == ["Approve", "Always in this chat", "Deny"]

        await fake.tap(card, "Approve", sender=BOB)
        [note] = await fake.wait_for(FOLLOWUP, 1, WAIT)
        assert "Only the approver" in note.body["content"] and note.body["flags"] & 64
        assert target.exists()

        await fake.tap(card, "Approve", sender=ALICE)
        await model.wait_requests(2, timeout=WAIT)
        assert not target.exists()
        assert last_tool_result(model).startswith("[approved by the owner]")
        callbacks = await fake.wait_for(CALLBACK, 2, WAIT)
        assert all(c.body["type"] == 6 for c in callbacks)  # acknowledged: deferred update
        await fake.wait(lambda: "Approved by" in card.content and not card.buttons, WAIT)
        [row] = await audit(daemon)
        assert (row.status, row.decided_by) == ("approved", f"discord:{ALICE['id']}")
    finally:
        await daemon.stop()
