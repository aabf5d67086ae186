"""Discord end to end: the whole daemon, discord.py against the fake Discord, the fake model.
A DM answered, a stranger paired, a channel mention answered in its thread, /stop mid-reply,
a long reply in balanced chunks, a reconnect that loses nothing and answers nothing twice,
slash commands, and `perch doctor`'s live check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.daemon import Daemon
from bot.operator.cli import main
from bot.operator.doctor import run_checks
from channels.chunking import parse_fence
from tests.fakes import discord_payloads as p
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.discord import ALICE, BOB, FakeDiscord, Posted
from tests.harness import make_config

pytestmark = pytest.mark.timeout(60)

MESSAGES = "POST /channels/{channel_id}/messages"


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def discord_settings(fake: FakeDiscord, **options: Any) -> dict[str, Any]:
    return {
        "channels.discord": {
            "enabled": True,
            "token": p.TOKEN,
            "api_base": fake.api_base,
            "allow_from": [ALICE["id"]],
            "groups": [p.CHANNEL_ID],
            "guild_ready_timeout": 0.05,
            "stream_interval": 0.05,
            "typing_interval": 0.2,
            **options,
        }
    }


@asynccontextmanager
async def daemon(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord, **options: Any
) -> AsyncIterator[Daemon]:
    config = make_config(tmp_path, model.base_url, discord_settings(fake, **options))
    running = Daemon(config)
    await running.start()
    try:
        await fake.gateway.wait(lambda: fake.gateway.connected)
        yield running
    finally:
        await running.stop()


def _last_user(model: FakeAnthropic) -> str:
    return last_user_text(model.requests[-1]) if model.requests else "?"


def shown(fake: FakeDiscord, channel_id: str) -> list[str]:
    """What the channel shows now: each of the bot's messages in its latest version."""
    return [m.content for m in fake.posted_in(channel_id)]


async def settled(fake: FakeDiscord, channel_id: str, n: int) -> list[Posted]:
    """Wait until `channel_id` holds `n` bot messages, none edited for a moment."""
    await fake.wait(lambda: len(fake.posted_in(channel_id)) >= n, timeout=10)
    return fake.posted_in(channel_id)


async def test_a_dm_is_answered_and_a_stranger_gets_a_pairing_code(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    async with daemon(tmp_path, model, fake):
        sent = await fake.dm("hello bot")
        await fake.wait(lambda: shown(fake, sent["channel_id"]) == ["echo: hello bot"], 10)

        stranger = await fake.dm("who are you?", sender=BOB)
        await fake.wait(lambda: len(fake.posted_in(stranger["channel_id"])) == 1, 10)
        [code] = shown(fake, stranger["channel_id"])
        assert "pairing code" in code
        [notice] = shown(fake, fake.dm_channels[ALICE["id"]])[1:]  # the owner is told
        assert "perch pairing approve discord" in notice
        assert len(model.requests) == 1


async def test_a_mention_in_a_guild_channel_is_answered_in_its_thread(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    async with daemon(tmp_path, model, fake, auto_thread=True):
        await fake.guild_message("lunch is at noon", sender=BOB)  # not addressed: context
        await fake.guild_message("hi", channel_id=p.OTHER_CHANNEL_ID, mention=True)  # not allowed
        asked = await fake.guild_message("when is lunch?", mention=True)
        thread = asked["id"]
        await fake.wait(lambda: shown(fake, thread)[-1:] == ["echo: " + _last_user(model)], 10)
        assert shown(fake, thread)[0].endswith("when is lunch?")
        asked_text = last_user_text(model.requests[-1])
        assert "lunch is at noon" in asked_text and asked_text.endswith("when is lunch?")
        assert fake.posted_in(p.CHANNEL_ID) == []  # the answer is in the thread only
        assert fake.posted_in(p.OTHER_CHANNEL_ID) == []

        await fake.guild_message("and dessert?", channel_id=thread)  # no mention needed there
        await fake.wait(lambda: len(model.requests) == 2, 10)
        await fake.wait(lambda: shown(fake, thread)[1:] == ["echo: " + _last_user(model)], 10)
        assert shown(fake, thread)[1].endswith("and dessert?")
        # one session per thread: the second turn sees the first
        history = str(model.requests[-1]["messages"])
        assert "noon" in history and "when is lunch?" in history
        assert len(model.requests) == 2


async def test_stop_mid_reply_stops_it_and_says_so(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    model.queue(Reply.stall("I am thinking about this at length", chunk=4))
    async with daemon(tmp_path, model, fake):
        sent = await fake.dm("tell me everything")
        dm = sent["channel_id"]
        await fake.wait(lambda: any("thinking" in m for m in shown(fake, dm)), 10)
        await fake.dm("/stop")
        await fake.wait(lambda: "Stopped." in shown(fake, dm), 10)
        await fake.dm("/stop")
        await fake.wait(lambda: "Nothing to stop." in shown(fake, dm), 10)
        assert len(model.requests) == 1  # commands never reach the model


async def test_a_long_reply_arrives_in_order_in_balanced_chunks(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    code = "```python\n" + "\n".join(f"step({i})  # one step of the work" for i in range(150))
    answer = "Here is the script:\n\n" + code + "\n```\n\nRun it twice."
    model.queue(Reply.text(answer, chunk=200))
    async with daemon(tmp_path, model, fake):
        sent = await fake.dm("write the script")
        dm = sent["channel_id"]
        await fake.wait(lambda: "".join(shown(fake, dm)).endswith("Run it twice."), 15)
        chunks = shown(fake, dm)
        assert len(chunks) >= 3
        assert all(len(chunk) <= 2000 for chunk in chunks)
        for chunk in chunks:
            fence = None
            for line in chunk.split("\n"):
                fence = (
                    parse_fence(line) if fence is None else (None if fence.closes(line) else fence)
                )
            assert fence is None, chunk[-200:]
        body = "\n".join(chunks)
        steps = [
            int(line.split("(")[1].split(")")[0])
            for line in body.split("\n")
            if line.startswith("step(")
        ]
        assert steps == list(range(150))


async def test_a_reconnect_loses_nothing_and_answers_nothing_twice(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    async with daemon(tmp_path, model, fake, streaming="off"):
        first = await fake.dm("one")
        dm = first["channel_id"]
        await fake.wait(lambda: shown(fake, dm) == ["echo: one"], 10)
        await fake.gateway.drop(clean=False)
        missed = await fake.dm("two")  # sent while the bot is away
        await fake.gateway.wait(lambda: fake.gateway.connected and len(fake.gateway.resumes) == 1)
        await fake.wait(lambda: shown(fake, dm) == ["echo: one", "echo: two"], 10)
        await fake.gateway.dispatch("MESSAGE_CREATE", missed)  # delivered again after the resume
        await fake.gateway.dispatch("MESSAGE_CREATE", first)
        await fake.dm("three")
        await fake.wait(lambda: len(fake.posted_in(dm)) >= 3, 10)
        await asyncio.sleep(0.3)
        assert shown(fake, dm) == ["echo: one", "echo: two", "echo: three"]
        assert [last_user_text(r) for r in model.requests] == ["one", "two", "three"]
        assert len(fake.gateway.identifies) == 1


async def test_slash_commands_answer_in_place(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    async with daemon(tmp_path, model, fake):
        await fake.wait(lambda: len(fake.commands) == 5)
        await fake.slash("stop", channel_id=p.CHANNEL_ID)
        edits = await fake.wait_for("PATCH /webhooks/{application_id}/{token}/messages/@original")
        assert edits[0].body["content"] == "Nothing to stop."
        await fake.slash("help")
        edits = await fake.wait_for(
            "PATCH /webhooks/{application_id}/{token}/messages/@original", 2
        )
        assert "/stopall" in edits[1].body["content"]
        assert fake.calls_to(MESSAGES) == []
        assert model.requests == []


async def test_doctor_checks_the_token_live(
    tmp_path: Path, model: FakeAnthropic, fake: FakeDiscord
) -> None:
    config = make_config(tmp_path, model.base_url, discord_settings(fake))
    [check] = [c for c in await run_checks(config) if c.name == "discord"]
    assert check.ok, check.line()
    assert "perch" in check.line()
    assert fake.calls_to("GET /users/@me")[0].headers["Authorization"] == f"Bot {p.TOKEN}"

    wrong = discord_settings(fake)
    wrong["channels.discord"]["token"] = p.TOKEN.replace("fake", "evil")
    config = make_config(tmp_path, model.base_url, wrong)
    [check] = [c for c in await run_checks(config) if c.name == "discord"]
    assert not check.ok
    assert "401" in check.line() and "DISCORD_BOT_TOKEN" in check.line()


async def test_onboard_sets_discord_up_and_checks_the_token_live(
    tmp_path: Path, fake: FakeDiscord, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-ant-onboard-discord"
    config, env_file = tmp_path / "config.yaml", tmp_path / "perch.env"
    async with FakeAnthropic(api_key=key) as model_server:
        code = await asyncio.to_thread(
            main,
            [
                *("onboard", "--config", str(config), "--yes", "--no-doctor"),
                *("--api-key", key, "--base-url", model_server.base_url),
                *("--channels", "discord", "--env", f"DISCORD_BOT_TOKEN={p.TOKEN}"),
                *("--set", f"channels.discord.api_base={fake.api_base}"),
                *("--owner", f"discord:{ALICE['id']}", "--secrets-path", str(env_file)),
                *("--secrets", "env"),
            ],
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"OK    discord: bot perch ({p.BOT_ID}) is reachable" in out
    data = yaml.safe_load(config.read_text())["channels"]["discord"]
    assert data["enabled"] is True and data["allow_from"] == [ALICE["id"]]
    assert data["token"] == "${DISCORD_BOT_TOKEN:-}"
    assert f"DISCORD_BOT_TOKEN={p.TOKEN}" in env_file.read_text()
    assert p.TOKEN not in config.read_text()
