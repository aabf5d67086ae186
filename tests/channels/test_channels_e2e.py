"""Each platform end to end: its real client library and fake server, the whole daemon, the
fake model. DM -> reply; unknown sender -> pairing code, not the model; group mention ->
reply in the group; unmentioned group message -> no reply, but context for the next one.
The last test runs `perch run` with all three platforms and the console side by side."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.daemon import Daemon
from tests.fakes import slack as slack_fake
from tests.fakes.anthropic import FakeAnthropic, last_user_text
from tests.fakes.signal import FakeSignal
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config
from tests.pty_perch import PtyPerch

pytestmark = pytest.mark.timeout(60)

ALICE = "+15550002"
SIGNAL_BOT = "+15550001"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def telegram_config(tg: FakeTelegram, **policy: Any) -> dict[str, Any]:
    return {
        "channels.telegram": {
            "enabled": True,
            "token": TOKEN,
            "base_url": tg.base_url,
            **policy,
        }
    }


async def test_telegram_end_to_end(tmp_path: Path, model: FakeAnthropic) -> None:
    async with FakeTelegram() as tg:
        config = make_config(
            tmp_path, model.base_url, telegram_config(tg, groups=["-1001234"], allow_from=["42"])
        )
        daemon = Daemon(config)
        await daemon.start()
        try:
            tg.dm("hello bot", user_id=42)
            await tg.wait_for("sendMessage", 1, timeout=10)
            assert tg.texts()[-1] == "echo: hello bot"

            tg.dm("who are you?", user_id=777)  # a stranger
            calls = await tg.wait_for("sendMessage", 3, timeout=10)
            notice, reply = calls[1], calls[2]  # the owner is told first
            assert str(notice.params["chat_id"]) == "42"
            assert "perch pairing approve telegram" in notice.params["text"]
            assert str(reply.params["chat_id"]) == "777" and "pairing code" in reply.params["text"]
            assert len(model.requests) == 1

            tg.group_message("lunch at noon", user_id=43, first_name="Bob")  # not addressed
            tg.group_message("when is lunch?", mention=True, user_id=42)
            calls = await tg.wait_for("sendMessage", 4, timeout=10)
            assert calls[-1].params["chat_id"] in (-1001234, "-1001234")
            assert len(model.requests) == 2
            asked = last_user_text(model.requests[-1])
            assert "lunch at noon" in asked and asked.endswith("when is lunch?")
        finally:
            await daemon.stop()


async def test_slack_end_to_end(tmp_path: Path, model: FakeAnthropic) -> None:
    sl = FakeSlack()
    await sl.start()
    try:
        config = make_config(
            tmp_path,
            model.base_url,
            {
                "channels.slack": {
                    "enabled": True,
                    "bot_token": "xoxb-test",
                    "app_token": "xapp-test",
                    "base_url": sl.base_url,
                    "groups": ["C200"],
                    "allow_from": ["UALICE"],
                }
            },
        )
        daemon = Daemon(config)
        await daemon.start()
        try:
            await sl.wait_connections(1)
            await sl.push_event(_slack_message(sl, "hi there", "D100", "UALICE"))
            await sl.wait_for("chat.postMessage", 1)
            assert sl.calls_to("chat.postMessage")[-1].params["text"] == "echo: hi there"

            await sl.push_event(_slack_message(sl, "hello?", "D900", "USTRANGER"))
            await sl.wait_for("chat.postMessage", 3)
            notice, reply = sl.calls_to("chat.postMessage")[1:3]  # the owner is told first
            assert notice.params["channel"] == "UALICE"
            assert "perch pairing approve slack" in notice.params["text"]
            assert reply.params["channel"] == "D900" and "pairing code" in reply.params["text"]
            assert len(model.requests) == 1

            await sl.push_event(_slack_message(sl, "deploy is at 5", "C200", "UBOB"))
            mention = _slack_message(
                sl, f"<@{slack_fake.BOT_USER_ID}> when is deploy?", "C200", "UALICE"
            )
            await sl.push_event(mention)
            calls = await sl.wait_for("chat.postMessage", 4)
            assert calls[-1].params["channel"] == "C200"
            assert calls[-1].params["thread_ts"] == mention["ts"]
            assert "deploy is at 5" in last_user_text(model.requests[-1])
        finally:
            await daemon.stop()
    finally:
        await sl.stop()


async def test_signal_end_to_end(tmp_path: Path, model: FakeAnthropic) -> None:
    async with FakeSignal(SIGNAL_BOT) as sg:
        group_id = sg.add_group("team-internal", "Team")
        config = make_config(
            tmp_path,
            model.base_url,
            {
                "channels.signal": {
                    "enabled": True,
                    "number": SIGNAL_BOT,
                    "service_url": sg.url,
                    "groups": [group_id],
                    "allow_from": [ALICE],
                }
            },
        )
        daemon = Daemon(config)
        await daemon.start()
        try:
            await sg.wait_connected()
            await sg.dm(ALICE, "ping")
            await sg.wait_for(lambda: len(sg.sent) >= 1)
            assert sg.sent[-1]["message"] == "echo: ping"

            await sg.dm("+15559999", "let me in")
            await sg.wait_for(lambda: len(sg.sent) >= 3)
            notice, reply = sg.sent[1], sg.sent[2]  # the owner is told first
            assert notice["recipients"] == [ALICE]
            assert "perch pairing approve signal" in notice["message"]
            assert reply["recipients"] == ["+15559999"] and "pairing code" in reply["message"]
            assert len(model.requests) == 1

            await sg.group_message("+15550003", "team-internal", "the key is under the mat")
            await sg.group_message(
                ALICE,
                "team-internal",
                "\ufffc where is the key?",
                mentions=[sg.mention_of_bot(0)],
            )
            await sg.wait_for(lambda: len(sg.sent) >= 4)
            assert sg.sent[-1]["recipients"] == [group_id]
            assert "under the mat" in last_user_text(model.requests[-1])
        finally:
            await daemon.stop()


def _slack_message(sl: FakeSlack, text: str, channel: str, user: str) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": channel,
        "channel_type": "im" if channel.startswith("D") else "channel",
        "user": user,
        "text": text,
        "ts": sl.new_ts(),
    }


async def test_all_channels_side_by_side_in_one_perch_run(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    sl = FakeSlack()
    await sl.start()
    async with FakeTelegram() as tg, FakeSignal(SIGNAL_BOT) as sg:
        config = {
            "providers": {
                "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": model.base_url}
            },
            "heartbeat": {"every": 0},
            "channels": {
                "telegram": {
                    "enabled": True,
                    "token": TOKEN,
                    "base_url": tg.base_url,
                    "allow_from": ["42"],
                },
                "slack": {
                    "enabled": True,
                    "bot_token": "xoxb-t",
                    "app_token": "xapp-t",
                    "base_url": sl.base_url,
                    "allow_from": ["UALICE"],
                },
                "signal": {
                    "enabled": True,
                    "number": SIGNAL_BOT,
                    "service_url": sg.url,
                    "allow_from": [ALICE],
                },
            },
        }
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump(config))
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789"}
        perch = await PtyPerch.start(path, env)  # the console needs a terminal
        try:
            await sl.wait_connections(1, timeout=20)
            await sg.wait_connected(within=20)
            tg.dm("from telegram", user_id=42)
            await sl.push_event(_slack_message(sl, "from slack", "D100", "UALICE"))
            await sg.dm(ALICE, "from signal")
            await perch.say("from console")
            await perch.expect("perch> echo: from console")
            await tg.wait_for("sendMessage", 1, timeout=20)
            await sl.wait_for("chat.postMessage", 1, timeout=20)
            await sg.wait_for(lambda: len(sg.sent) >= 1, within=20)
            assert tg.texts() == ["echo: from telegram"]
            assert sl.calls_to("chat.postMessage")[0].params["text"] == "echo: from slack"
            assert sg.sent[0]["message"] == "echo: from signal"
        finally:
            perch.proc.terminate()
            code, text = await perch.finish()
            await sl.stop()
        assert code == 0, text[-2000:]
        err = (text + (tmp_path / "data" / "perch.log").read_text()).encode()
        assert "sk-ant-test-0123456789" not in err.decode()
        assert TOKEN not in err.decode()
