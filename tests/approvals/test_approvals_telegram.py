"""Approvals on Telegram end to end: python-telegram-bot against the fake Bot API, the whole
daemon, the fake model running `exec`. The owner's DM gets the request as an inline keyboard;
a tap is a `callback_query` the daemon answers (`answerCallbackQuery`) before it edits the
card to show the decision; the model is told what happened and goes on."""

from __future__ import annotations

import asyncio
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
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import TOKEN, Call, FakeTelegram
from tests.harness import make_config

pytestmark = pytest.mark.timeout(300)
WAIT = 60  # generous: a loaded machine takes seconds to import the model SDK
OWNER, STRANGER = 42, 777


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def next_card(tg: FakeTelegram, seen: int) -> Call:
    """The next message sent with an inline keyboard (after `seen` of them)."""
    async with asyncio.timeout(WAIT):
        while True:
            cards = [c for c in tg.calls("sendMessage") if c.params.get("reply_markup")]
            if len(cards) > seen:
                return cards[seen]
            await tg.wait_for("sendMessage", len(tg.calls("sendMessage")) + 1, WAIT)


async def edited_to(tg: FakeTelegram, fragment: str) -> Call:
    """The first card edit whose text holds `fragment` (waiting for it)."""
    async with asyncio.timeout(WAIT):
        while True:
            for call in tg.calls("editMessageText"):
                if fragment in str(call.params.get("text")):
                    return call
            await tg.wait_for("editMessageText", len(tg.calls("editMessageText")) + 1, WAIT)


async def test_exec_waits_for_the_owners_tap_on_telegram(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    first, second, fourth = (workspace_file(tmp_path, f"{n}.txt") for n in "abd")
    async with FakeTelegram() as tg:
        settings = {
            "channels.telegram": {
                "enabled": True,
                "token": TOKEN,
                "base_url": tg.base_url,
                "allow_from": [str(OWNER)],
            },
            **exec_settings(timeout="5m"),
        }
        daemon = Daemon(make_config(tmp_path, model.base_url, settings))
        await daemon.start()
        try:
            # 1. Approve: the keyboard comes, a stranger's tap is refused, the owner's counts.
            script_exec(model, "rm a.txt")
            tg.dm("please delete a.txt", user_id=OWNER)
            card = await next_card(tg, 0)
            assert str(card.params["chat_id"]) == str(OWNER)
            assert "rm a.txt" in card.params["text"]
            labels = [label for label, _ in tg.buttons(card)]
            assert labels == ["Approve", "Always in this chat", "Deny"]
            data = dict(tg.buttons(card))
            tg.tap(card, data["Deny"], user_id=STRANGER)
            answers = await tg.wait_for("answerCallbackQuery", 1, WAIT)
            assert "Only the approver" in answers[-1].params["text"]
            assert first.exists() and len(model.requests) == 1
            tg.tap(card, data["Approve"], user_id=OWNER)
            await model.wait_requests(2, timeout=WAIT)
            assert not first.exists()
            assert last_tool_result(model).startswith("[approved by the owner]")
            answers = await tg.wait_for("answerCallbackQuery", 2, WAIT)
            assert answers[-1].params["text"].startswith("Approved")
            edit = await edited_to(tg, "Approved by 42")
            assert str(edit.params["message_id"]) == str(card.result["message_id"])
            assert not edit.params.get("reply_markup")  # the buttons are gone

            # 2. Deny: the command does not run and the model is told so.
            await tg.wait_for("sendMessage", 2, WAIT)  # "done" delivered
            script_exec(model, "rm b.txt")
            tg.dm("and b.txt", user_id=OWNER)
            card = await next_card(tg, 1)
            tg.tap(card, dict(tg.buttons(card))["Deny"], user_id=OWNER)
            await model.wait_requests(4, timeout=WAIT)
            assert second.exists()
            assert "Denied by the owner" in last_tool_result(model)

            # 3. /stop while it waits: the request is closed, the command never runs.
            script_exec(model, "rm d.txt")
            tg.dm("and d.txt", user_id=OWNER)
            card = await next_card(tg, 2)
            tg.dm("/stop", user_id=OWNER)
            await edited_to(tg, "Stopped before an answer")
            assert fourth.exists()
            tg.tap(card, dict(tg.buttons(card))["Approve"], user_id=OWNER)  # too late
            answers = await tg.wait_for("answerCallbackQuery", 4, WAIT)
            assert "answered already" in answers[-1].params["text"]
            assert fourth.exists()

            rows = await audit(daemon)
            assert [r.status for r in rows] == ["approved", "denied", "cancelled"]
            assert [r.summary for r in rows] == ["rm a.txt", "rm b.txt", "rm d.txt"]
            assert rows[0].decided_by == rows[1].decided_by == "telegram:42"
            assert all(r.approver == "telegram:42" and r.decided_at for r in rows)
        finally:
            await daemon.stop()
