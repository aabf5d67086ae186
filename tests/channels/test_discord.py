"""The Discord channel against the fake Discord on 127.0.0.1, connecting and receiving:
discord.py's real gateway and REST client, pointed at the fake through `api_base` alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from channels.base import Attachment, Channel, ChatRef, Image, Inbound, Outbound
from channels.discord.adapter import DiscordChannel
from tests.discord_support import (
    MESSAGES,
    channel_chat,
    make_options,
    running,
)
from tests.fakes import discord_payloads as p
from tests.fakes.chat import Inbox
from tests.fakes.discord import ALICE, BOB, OTHER_BOT, FakeDiscord
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


# -- connecting ------------------------------------------------------------------------------


async def test_connects_through_api_base_with_the_message_content_intent(
    fake: FakeDiscord,
) -> None:
    fake.gateway.heartbeat_ms = 100
    async with running(fake) as (channel, _):
        assert isinstance(channel, Channel)
        assert channel.status().up
        assert channel.account == p.BOT_ID
        routes = [call.route for call in fake.calls[:3]]
        assert routes == ["GET /users/@me", "GET /oauth2/applications/@me", "GET /gateway/bot"]
        [identify] = fake.gateway.identifies
        assert identify["intents"] & p.INTENT_MESSAGE_CONTENT
        assert "compress=zlib-stream" in fake.gateway.urls[0]
        await fake.gateway.wait(lambda: fake.gateway.heartbeats >= 3)


async def test_a_dropped_socket_is_resumed_and_nothing_is_lost_or_seen_twice(
    fake: FakeDiscord,
) -> None:
    async with running(fake) as (channel, inbox):
        await fake.dm("before the drop")
        await inbox.get(1)
        for clean in (False, True):
            await fake.gateway.drop(clean)
            missed = await fake.dm(f"while away ({clean})")
            await fake.gateway.wait(lambda: fake.gateway.connected)
            got = await inbox.get(len(inbox.items) + 1)
            assert got.message_id == missed["id"]
            # Discord may deliver a message again after a resume: it is not handed on twice.
            await fake.gateway.dispatch("MESSAGE_CREATE", missed)
        await fake.dm("after")
        assert (await inbox.get(4)).text == "after"
        assert [i.text for i in inbox.items] == [
            "before the drop",
            "while away (False)",
            "while away (True)",
            "after",
        ]
        assert len(fake.gateway.identifies) == 1
        assert len(fake.gateway.resumes) == 2
        resume = fake.gateway.resumes[0]
        assert resume["session_id"] and resume["seq"] >= 3
        assert all(url.startswith("/resume-gateway") for url in fake.gateway.urls[1:])
        assert channel.status().up


async def test_status_is_down_while_discord_is_unreachable_and_up_once_it_appears() -> None:
    fake = FakeDiscord()
    await fake.start()
    port = fake.port
    await fake.stop()
    channel = DiscordChannel(make_options(fake, connect_timeout=5))
    inbox = Inbox()
    try:
        started = time.monotonic()
        await channel.start(inbox)
        assert time.monotonic() - started < 2.0  # the first failed attempt ends the wait
        status = channel.status()
        assert not status.up
        assert "cannot reach Discord" in status.detail
        assert p.TOKEN not in status.detail
        await fake.start(port)
        await fake.gateway.wait(lambda: fake.gateway.connected, timeout=10.0)
        await fake.dm("you are back")
        assert (await inbox.get()).text == "you are back"
        assert channel.status().up
    finally:
        await channel.stop()
        await fake.stop()


async def test_a_refused_token_says_what_to_fix_and_stops_retrying(fake: FakeDiscord) -> None:
    other = p.TOKEN.replace("fake-signature", "wrong-signature")
    async with running(fake, token=other) as (channel, _):
        status = channel.status()
        assert not status.up
        assert (
            "refused the bot token" in status.detail and "channels.discord.token" in status.detail
        )
        calls = len(fake.calls)
        await asyncio.sleep(1.2)  # the first retry would have come after 1 s
        assert len(fake.calls) == calls


async def test_a_missing_message_content_intent_says_where_to_switch_it_on(
    fake: FakeDiscord,
) -> None:
    fake.gateway.privileged_intents = 0
    async with running(fake) as (channel, _):
        status = channel.status()
        assert not status.up
        assert "Message Content Intent" in status.detail


async def test_stop_is_prompt_and_cancels_handlers_still_running(fake: FakeDiscord) -> None:
    entered = asyncio.Event()

    async def stuck(_: Inbound) -> None:
        entered.set()
        await asyncio.Event().wait()

    before = asyncio.all_tasks()
    channel = DiscordChannel(make_options(fake))
    await channel.start(stuck)
    await fake.dm("take your time")
    await asyncio.wait_for(entered.wait(), 5.0)
    started = time.monotonic()
    await channel.stop()
    assert time.monotonic() - started < 3.0
    assert not channel.status().up
    # discord.py's own ready timer may still be finishing its last (0.05 s) wait
    await eventually(lambda: not {t for t in asyncio.all_tasks() - before if not t.done()}, 1.0)


# -- receiving -------------------------------------------------------------------------------


async def test_dm_becomes_inbound_and_the_reply_goes_to_the_dm_channel(fake: FakeDiscord) -> None:
    async with running(fake) as (channel, inbox):
        sent = await fake.dm("hello *there*")
        got = await inbox.get()
        assert got.chat == ChatRef("discord", p.BOT_ID, "dm", ALICE["id"], None, sent["id"])
        assert (got.text, got.sender_id, got.sender_name) == ("hello *there*", ALICE["id"], "Alice")
        assert not got.mentioned
        await channel.send(Outbound(got.chat, "Hi **you**"))
        [call] = await fake.wait_for(MESSAGES)
        assert call.params["channel_id"] == sent["channel_id"]
        assert call.body["content"] == "Hi **you**"
        assert "message_reference" not in call.body
        assert call.body["allowed_mentions"]["parse"] == []


async def test_a_dm_to_someone_who_never_wrote_opens_the_dm_channel(fake: FakeDiscord) -> None:
    async with running(fake) as (channel, _):
        chat = ChatRef("discord", p.BOT_ID, "dm", BOB["id"])
        await channel.send(Outbound(chat, "a heartbeat note"))
        [opened] = fake.calls_to("POST /users/@me/channels")
        assert str(opened.body["recipient_id"]) == BOB["id"]
        [call] = fake.calls_to(MESSAGES)
        assert call.params["channel_id"] == fake.dm_channels[BOB["id"]]


async def test_a_mention_in_a_channel_is_answered_as_a_reply_without_pings(
    fake: FakeDiscord,
) -> None:
    async with running(fake) as (channel, inbox):
        sent = await fake.guild_message("what is up, <@1600000000000000002>?", mention=True)
        got = await inbox.get()
        assert got.mentioned
        assert got.text == "what is up, @1600000000000000002?"
        assert got.chat == channel_chat(reply_to=sent["id"])
        await channel.send(Outbound(got.chat, "Not much. <@1600000000000000002> @everyone"))
        [call] = await fake.wait_for(MESSAGES)
        assert call.params["channel_id"] == p.CHANNEL_ID
        assert call.body["message_reference"]["message_id"] == int(sent["id"])
        assert call.body["allowed_mentions"] == {"parse": [], "replied_user": False}


async def test_what_counts_as_addressing_the_bot(fake: FakeDiscord) -> None:
    async with running(fake) as (_, inbox):
        await fake.guild_message("just chatting")
        await fake.guild_message(f"<@&{p.BOT_ROLE_ID}> role call")
        await fake.guild_message("@everyone listen", mention_everyone=True)
        mine = p.message(p.CHANNEL_ID, p.bot_user(), "an earlier answer", guild_id=p.GUILD_ID)
        await fake.guild_message("thanks!", referenced=mine)
        bobs = p.message(p.CHANNEL_ID, BOB, "lunch at noon?", guild_id=p.GUILD_ID)
        await fake.guild_message("what do you think?", mention=True, referenced=bobs)
        got = [await inbox.get(n) for n in range(1, 6)]
        assert [g.mentioned for g in got] == [False, True, False, True, True]
        assert got[1].text == "role call"
        assert got[4].text == "[replying to Bob: lunch at noon?]\nwhat do you think?"


async def test_own_other_bots_webhook_system_and_edited_messages_are_ignored(
    fake: FakeDiscord,
) -> None:
    async with running(fake) as (channel, inbox):
        await channel.send(Outbound(channel_chat(), "my own words"))  # echoed on the gateway
        await fake.guild_message("another bot", sender=OTHER_BOT, mention=True)
        hooked = p.message(p.CHANNEL_ID, BOB, "from a webhook", guild_id=p.GUILD_ID)
        hooked["webhook_id"] = "1700000000000000001"
        await fake.gateway.dispatch("MESSAGE_CREATE", hooked)
        await fake.guild_message("pinned a message", kind=6)
        edited = await fake.guild_message("first words")
        await fake.gateway.dispatch("MESSAGE_UPDATE", {**edited, "content": "second words"})
        await fake.guild_message("", mention=False)  # a sticker: no text, no file
        await fake.guild_message("marker")
        assert (await inbox.get(1)).text == "first words"
        assert (await inbox.get(2)).text == "marker"
        await asyncio.sleep(0.1)
        assert len(inbox.items) == 2


async def test_commands_addressed_to_the_bot_are_normalised(fake: FakeDiscord) -> None:
    async with running(fake) as (_, inbox):
        await fake.dm("/stop@perch")
        await fake.guild_message("/stopall@Perch now", mention=True)
        await fake.dm("/stop@otherbot")
        texts = [(await inbox.get(n)).text for n in (1, 2, 3)]
        assert texts == ["/stop", "/stopall now", "/stop@otherbot"]


async def test_a_thread_has_its_own_session_and_answers_go_into_it(fake: FakeDiscord) -> None:
    people = fake.add_thread(owner_id=ALICE["id"])
    async with running(fake) as (channel, inbox):
        sent = await fake.guild_message("in a thread", channel_id=people, mention=True)
        got = await inbox.get()
        assert got.chat == channel_chat(reply_to=sent["id"], thread=people)
        await channel.send(Outbound(got.chat, "answered in the thread"))
        [call] = await fake.wait_for(MESSAGES)
        assert call.params["channel_id"] == people
        assert call.body["message_reference"]["message_id"] == int(sent["id"])
        # the bot took part: later messages there count as addressed to it
        await fake.guild_message("and a follow-up", channel_id=people)
        assert (await inbox.get(2)).mentioned


async def test_a_thread_the_library_has_not_seen_is_looked_up(fake: FakeDiscord) -> None:
    async with running(fake) as (_, inbox):
        late = fake.add_thread(owner_id=BOB["id"])  # opened after the guild was loaded
        await fake.guild_message("new thread", channel_id=late)
        got = await inbox.get()
        assert (got.chat.chat_id, got.chat.thread_id) == (p.CHANNEL_ID, late)
        assert not got.mentioned
        assert fake.calls_to("GET /channels/{channel_id}")[0].params["channel_id"] == late


async def test_auto_thread_answers_a_channel_mention_in_a_thread_started_from_it(
    fake: FakeDiscord,
) -> None:
    async with running(fake, auto_thread=True) as (channel, inbox):
        sent = await fake.guild_message("plan the release", mention=True)
        got = await inbox.get()
        assert got.chat == channel_chat(reply_to=sent["id"], thread=sent["id"])
        async with channel.typing(got.chat):
            await fake.wait_for("POST /channels/{channel_id}/typing")
        await channel.send(Outbound(got.chat, "Here is the plan."))
        [started] = fake.calls_to("POST /channels/{channel_id}/messages/{message_id}/threads")
        assert started.params == {"channel_id": p.CHANNEL_ID, "message_id": sent["id"]}
        assert started.body["name"] == "plan the release"
        [call] = fake.calls_to(MESSAGES)
        assert call.params["channel_id"] == sent["id"]
        assert "message_reference" not in call.body
        await fake.guild_message("and the date?", channel_id=sent["id"])
        follow = await inbox.get(2)
        assert follow.mentioned  # a thread the bot started
        assert (follow.chat.chat_id, follow.chat.thread_id) == (p.CHANNEL_ID, sent["id"])


async def test_attachments_become_images_voice_and_files(fake: FakeDiscord) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    async with running(fake, max_image_bytes=2_000) as (_, inbox):
        image = fake.add_file("cat.png", png, "image/png")
        voice = fake.add_file(
            "voice-message.ogg",
            b"OggS" + bytes(300),
            "audio/ogg",
            duration_secs=3.5,
            waveform="AA==",
        )
        doc = fake.add_file("notes.pdf", b"%PDF-1.4 hello", "application/pdf")
        big = fake.add_file("big.jpg", bytes(5_000), "image/jpeg")
        await fake.dm("look", attachments=[image, doc, big])
        got = await inbox.get()
        assert got.images == (Image("image/png", png),)
        assert got.attachments == (
            Attachment("file", "notes.pdf", "application/pdf", b"%PDF-1.4 hello", 14),
        )
        assert got.text == "look\n[image too large: 0 MB, limit 0 MB]"
        await fake.dm("", attachments=[voice], flags=p.VOICE_MESSAGE_FLAG)
        [clip] = (await inbox.get(2)).attachments
        assert (clip.kind, clip.media_type, clip.duration_s) == ("audio", "audio/ogg", 3.5)
        assert clip.data == b"OggS" + bytes(300)
