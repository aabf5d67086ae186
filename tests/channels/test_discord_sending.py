"""The Discord channel against the fake Discord on 127.0.0.1, sending: chunks, rate limits,
streaming, typing, files, reactions, slash commands, and the options' checks."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import AsyncIterator

import pytest

from channels.base import Outbound, OutboundFile, OutboundVoice
from channels.discord.adapter import DiscordDeliveryError
from channels.discord.options import DiscordOptions
from channels.discord.render import render_discord
from tests.discord_support import (
    EDIT,
    MESSAGES,
    channel_chat,
    fences_balanced,
    running,
)
from tests.fakes import discord_payloads as p
from tests.fakes.discord import ALICE, FakeDiscord

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


# -- sending ---------------------------------------------------------------------------------


async def test_a_long_reply_arrives_in_order_in_chunks_with_balanced_fences(
    fake: FakeDiscord,
) -> None:
    code = "```python\n" + "\n".join(f"print({i})  # a line of code" for i in range(120)) + "\n```"
    text = "\n\n".join([*(f"Paragraph {i}: " + "word " * 90 for i in range(6)), code, "The end."])
    async with running(fake) as (channel, _):
        await channel.send(Outbound(channel_chat(reply_to="1300000000000000099"), text))
        calls = fake.calls_to(MESSAGES)
        contents = [call.body["content"] for call in calls]
        assert len(contents) >= 3
        assert all(len(c) <= 2000 for c in contents)
        assert all(fences_balanced(c) for c in contents)
        assert "message_reference" in calls[0].body
        assert all("message_reference" not in call.body for call in calls[1:])
        joined = "\n".join(contents)
        numbers = [int(n) for n in re.findall(r"print\((\d+)\)", joined)]
        assert numbers == list(range(120))
        assert contents[-1].endswith("The end.")


async def test_a_429_is_waited_out_and_the_message_posted_once(fake: FakeDiscord) -> None:
    fake.fail_next(MESSAGES, 429, retry_after=0.3)
    async with running(fake) as (channel, _):
        started = time.monotonic()
        await channel.send(Outbound(channel_chat(), "after the wait"))
        assert time.monotonic() - started >= 0.3
        assert len(fake.calls_to(MESSAGES)) == 2
        assert [m.content for m in fake.posted_in(p.CHANNEL_ID)] == ["after the wait"]


async def test_a_429_that_outlasts_the_library_is_retried_by_perch(fake: FakeDiscord) -> None:
    fake.fail_next(MESSAGES, 429, retry_after=0.05, times=5)  # discord.py gives up after five
    async with running(fake) as (channel, _):
        await channel.send(Outbound(channel_chat(), "persistent"))
        assert len(fake.calls_to(MESSAGES)) == 6
        assert [m.content for m in fake.posted_in(p.CHANNEL_ID)] == ["persistent"]


async def test_a_429_longer_than_perch_waits_fails_with_a_clear_error(fake: FakeDiscord) -> None:
    fake.fail_next(MESSAGES, 429, retry_after=120)
    async with running(fake, max_rate_limit_wait=10) as (channel, _):
        with pytest.raises(DiscordDeliveryError, match=r"rate limited by Discord.*120"):
            await channel.send(Outbound(channel_chat(), "too long to wait"))
        assert fake.posted_in(p.CHANNEL_ID) == []


async def test_the_library_paces_a_tight_bucket_without_hitting_429(fake: FakeDiscord) -> None:
    fake.limit_bucket(MESSAGES, 2, 0.5)
    async with running(fake, chunk_limit=100) as (channel, _):
        text = "\n\n".join(f"Part {i}: " + "x" * 80 for i in range(5))
        await channel.send(Outbound(channel_chat(), text))
        assert len(fake.posted_in(p.CHANNEL_ID)) == 5
        assert fake.rate_limited == 0


async def test_a_refusal_raises_an_actionable_error(fake: FakeDiscord) -> None:
    fake.fail_next(MESSAGES, 403)
    async with running(fake) as (channel, _):
        with pytest.raises(DiscordDeliveryError, match=r"HTTP 403"):
            await channel.send(Outbound(channel_chat(), "hello?"))


async def test_stream_posts_one_preview_edits_it_and_finalises_in_place(fake: FakeDiscord) -> None:
    async with running(fake) as (channel, _):
        stream = channel.reply_stream(channel_chat(reply_to="1300000000000000098"))
        await stream.update("Hel")
        await fake.wait_for(MESSAGES)
        await stream.update("Hello wor")
        await fake.wait_for(EDIT)
        await stream.finish("Hello **world**, done")
        [posted] = fake.posted_in(p.CHANNEL_ID)
        assert posted.reference == "1300000000000000098"
        assert posted.content == render_discord("Hello **world**, done")
        assert posted.edits[0] == "Hello wor"
        assert len(fake.calls_to(MESSAGES)) == 1


async def test_stream_edits_keep_to_the_interval(fake: FakeDiscord) -> None:
    async with running(fake, stream_interval=0.4) as (channel, _):
        stream = channel.reply_stream(channel_chat())
        await stream.update("a")
        [post] = await fake.wait_for(MESSAGES)
        for text in ("ab", "abc", "abcd"):
            await stream.update(text)
        [edit] = await fake.wait_for(EDIT)
        assert edit.at - post.at >= 0.4
        assert edit.body["content"] == "abcd"
        await stream.finish("abcde")
        assert [c.body["content"] for c in fake.calls_to(EDIT)] == ["abcd", "abcde"]


async def test_typing_is_refreshed_while_the_turn_runs(fake: FakeDiscord) -> None:
    async with running(fake) as (channel, _):
        async with channel.typing(channel_chat()):
            await fake.wait_for("POST /channels/{channel_id}/typing", 2)
        count = len(fake.calls_to("POST /channels/{channel_id}/typing"))
        await asyncio.sleep(0.2)
        assert len(fake.calls_to("POST /channels/{channel_id}/typing")) == count


async def test_files_and_reactions(fake: FakeDiscord) -> None:
    async with running(fake) as (channel, inbox):
        sent = await fake.dm("react to me")
        got = await inbox.get()
        await channel.react(got.chat, got.message_id, got.sender_id, "👀")
        await channel.react(got.chat, got.message_id, got.sender_id, "👀", remove=True)
        await channel.react(got.chat, "interaction:1", got.sender_id, "👀")  # no message: no-op
        [added] = fake.calls_to(
            "PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
        )
        assert added.params["emoji"] == "👀"
        assert added.params["channel_id"] == sent["channel_id"]
        assert fake.calls_to(
            "DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
        )
        await channel.send_file(
            OutboundFile(got.chat, "report.csv", "text/csv", b"a,b\n1,2\n", "here")
        )
        [upload] = fake.calls_to(MESSAGES)
        assert upload.body["content"] == "here"
        assert list(upload.files.values()) == [("report.csv", b"a,b\n1,2\n")]


async def test_a_voice_note_is_posted_as_a_discord_voice_message(fake: FakeDiscord) -> None:
    note = b"OggS" + bytes(300)  # the bytes are passed through as they are
    async with running(fake) as (channel, inbox):
        await fake.dm("say it")
        got = await inbox.get()
        await channel.send_voice(OutboundVoice(got.chat, note, 2.5, "", bytes([0, 128, 255])))
        [upload] = fake.calls_to(MESSAGES)
        assert upload.body["flags"] == 1 << 13  # IS_VOICE_MESSAGE
        assert not upload.body.get("content")  # a voice message carries no text
        [attachment] = upload.body["attachments"]
        assert attachment["filename"] == "voice-message.ogg"
        assert attachment["duration_secs"] == 2.5
        assert base64.b64decode(attachment["waveform"]) == bytes([0, 128, 255])
        assert list(upload.files.values()) == [("voice-message.ogg", note)]


# -- slash commands --------------------------------------------------------------------------


async def test_slash_commands_are_registered_and_a_use_is_answered_in_place(
    fake: FakeDiscord,
) -> None:
    async with running(fake) as (channel, inbox):
        await fake.wait(lambda: len(fake.commands) == 5)
        assert sorted(c["name"] for c in fake.commands) == [
            "help",
            "model",
            "status",
            "stop",
            "stopall",
        ]
        used = await fake.slash("model", channel_id=p.CHANNEL_ID, argument="local/qwen3")
        got = await inbox.get()
        assert (got.text, got.mentioned) == ("/model local/qwen3", True)
        assert got.chat == channel_chat(reply_to=f"interaction:{used['id']}")
        [ack] = fake.calls_to("POST /interactions/{interaction_id}/{token}/callback")
        assert ack.body["type"] == 5  # "thinking..."
        await channel.send(Outbound(got.chat, "Switched to **local/qwen3**.", urgent=True))
        [answer] = fake.calls_to("PATCH /webhooks/{application_id}/{token}/messages/@original")
        assert answer.body["content"] == "Switched to **local/qwen3**."
        assert fake.calls_to(MESSAGES) == []
    async with running(fake) as _:  # a restart finds them in place: nothing re-registered
        await fake.gateway.wait(lambda: len(fake.gateway.identifies) == 2)
        await asyncio.sleep(0.2)
        assert len(fake.calls_to("POST /applications/{application_id}/commands")) == 5


async def test_an_unanswered_slash_command_is_withdrawn(fake: FakeDiscord) -> None:
    async with running(fake, interaction_timeout=0.2) as (_, inbox):
        await fake.slash("status")
        got = await inbox.get()
        assert got.chat.kind == "dm" and got.chat.chat_id == ALICE["id"]
        await fake.wait_for("DELETE /webhooks/{application_id}/{token}/messages/@original")


# -- options ---------------------------------------------------------------------------------


def test_options_refuse_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="DISCORD_BOT_TOKEN"):
        DiscordOptions(enabled=True)
    with pytest.raises(ValueError, match="'Bot '"):
        DiscordOptions(enabled=True, token="Bot " + p.TOKEN)
    with pytest.raises(ValueError, match="does not look like a bot token"):
        DiscordOptions(enabled=True, token="0123456789abcdef0123456789abcdef")
    with pytest.raises(ValueError, match="slash command name"):
        DiscordOptions(enabled=True, token=p.TOKEN, slash_commands=["/stop"])
    with pytest.raises(ValueError, match="chunk_limit"):
        DiscordOptions(enabled=True, token=p.TOKEN, chunk_limit=4000)
    assert DiscordOptions().api_base == "https://discord.com/api/v10"
