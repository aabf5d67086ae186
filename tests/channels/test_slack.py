"""The Slack channel end to end: slack-bolt and slack_sdk against the fake Slack on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from channels.base import Channel, ChatRef, FinalOnlyStream, Image, Inbound, Outbound
from channels.chunking import split_markdown
from channels.formatting import render_plain
from channels.slack import inbound as slack_inbound
from channels.slack.adapter import (
    TYPING_STATUS,
    SlackChannel,
    SlackDeliveryError,
    SlackOptions,
    normalise_slack_text,
)
from channels.slack.render import render_slack_mrkdwn
from tests.fakes.chat import Inbox
from tests.fakes.slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_payload, sign
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(20)


def make_options(fake: FakeSlack, **overrides: Any) -> SlackOptions:
    values: dict[str, Any] = {
        "bot_token": "xoxb-test",
        "app_token": "xapp-test",
        "base_url": fake.base_url,
        "ping_interval": 0.2,
        "stream_interval": 0.05,
        "typing_interval": 0.05,
        "connect_timeout": 5.0,
        "max_retries": 3,
    }
    values.update(overrides)
    return SlackOptions(**values)


@contextlib.asynccontextmanager
async def running(
    fake: FakeSlack, inbox: Callable[[Inbound], Any] | None = None, **overrides: Any
) -> AsyncIterator[tuple[SlackChannel, Inbox]]:
    channel = SlackChannel(make_options(fake, **overrides))
    box = Inbox()
    await channel.start(inbox or box)
    try:
        yield channel, box
    finally:
        await channel.stop()


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.stop()


def message(
    fake: FakeSlack, text: str, channel: str = "D100", user: str = "UALICE", **extra: Any
) -> dict[str, Any]:
    channel_type = "im" if channel.startswith("D") else "channel"
    event = {
        "type": "message",
        "channel": channel,
        "channel_type": channel_type,
        "user": user,
        "text": text,
        "ts": fake.new_ts(),
    }
    event.update(extra)
    return event


def group_chat(thread_id: str | None = None, reply_to: str | None = "1700000000.000001") -> ChatRef:
    return ChatRef("slack", TEAM_ID, "group", "C200", thread_id, reply_to)


# -- receiving -------------------------------------------------------------------------------


async def test_dm_becomes_inbound_and_the_reply_goes_to_the_dm(fake: FakeSlack) -> None:
    async with running(fake) as (channel, inbox):
        event = message(fake, "hello &amp; welcome &lt;3")
        await fake.push_event(event)
        got = await inbox.get()
        assert got.chat == ChatRef("slack", TEAM_ID, "dm", "D100", None, event["ts"])
        assert (got.text, got.sender_id, got.message_id) == (
            "hello & welcome <3",
            "UALICE",
            event["ts"],
        )
        assert got.sender_name == "Ualice"
        assert not got.mentioned
        assert channel.account == TEAM_ID
        assert isinstance(channel, Channel)
        assert channel.status().up

        await channel.send(Outbound(got.chat, "Hi **there**"))
        [call] = await fake.wait_for("chat.postMessage")
        assert call.params["channel"] == "D100"
        assert "thread_ts" not in call.params
        assert call.params["text"] == render_slack_mrkdwn("Hi **there**")
        assert call.token == "xoxb-test"


@pytest.mark.parametrize("mention_first", [False, True])
async def test_channel_mention_arriving_as_message_and_app_mention_is_handled_once(
    fake: FakeSlack, mention_first: bool
) -> None:
    async with running(fake) as (channel, inbox):
        event = message(fake, f"<@{BOT_USER_ID}>: what is up?", channel="C200")
        mention = {key: event[key] for key in ("channel", "user", "text", "ts")}
        mention["type"] = "app_mention"
        first, second = (mention, event) if mention_first else (event, mention)
        await fake.push_event(first)
        await fake.push_event(second)
        marker = message(fake, "marker", channel="C200")
        await fake.push_event(marker)

        got = await inbox.get()
        assert got.mentioned
        assert got.text == "what is up?"
        # The answer opens a thread under the mention; its session is that thread.
        assert got.chat == ChatRef("slack", TEAM_ID, "group", "C200", event["ts"], event["ts"])
        assert (await inbox.get(2)).text == "marker"
        assert len(inbox.items) == 2

        await channel.send(Outbound(got.chat, "Not much."))
        [call] = await fake.wait_for("chat.postMessage")
        assert (call.params["channel"], call.params["thread_ts"]) == ("C200", event["ts"])


async def test_unmentioned_channel_message_arrives_with_mentioned_false(fake: FakeSlack) -> None:
    async with running(fake) as (_, inbox):
        await fake.push_event(message(fake, "just chatting", channel="C200"))
        got = await inbox.get()
        assert not got.mentioned
        assert got.chat.kind == "group"
        assert got.chat.thread_id is None
        assert got.text == "just chatting"


async def test_messages_in_threads_the_bot_is_in_count_as_mentions(fake: FakeSlack) -> None:
    async with running(fake) as (channel, inbox):
        root = fake.new_ts()
        await fake.push_event(
            message(fake, "before", channel="C200", thread_ts=root, parent_user_id="UBOB")
        )
        before = await inbox.get()
        assert not before.mentioned
        assert before.chat.thread_id == root

        await channel.send(Outbound(before.chat, "I am in this thread now."))
        [call] = await fake.wait_for("chat.postMessage")
        assert call.params["thread_ts"] == root

        await fake.push_event(
            message(fake, "after", channel="C200", thread_ts=root, parent_user_id="UBOB")
        )
        assert (await inbox.get(2)).mentioned

        under_bot = fake.new_ts()
        await fake.push_event(
            message(fake, "reply", channel="C200", thread_ts=under_bot, parent_user_id=BOT_USER_ID)
        )
        reply = await inbox.get(3)
        assert reply.mentioned
        assert reply.chat.thread_id == under_bot


async def test_own_bot_edit_and_system_messages_are_ignored(fake: FakeSlack) -> None:
    async with running(fake) as (_, inbox):
        ignored = [
            message(fake, "my own words", channel="C200", user=BOT_USER_ID),
            message(fake, "another bot", channel="C200", user="UOTHER", bot_id="B2"),
            message(fake, "", channel="C200", subtype="bot_message", bot_id="B2"),
            message(
                fake,
                "",
                channel="C200",
                subtype="message_changed",
                message={"user": "UALICE", "text": "edited", "ts": "1.1"},
            ),
            message(fake, "", channel="C200", subtype="message_deleted", deleted_ts="1.1"),
            message(fake, "<@UALICE> has joined", channel="C200", subtype="channel_join"),
        ]
        for event in ignored:
            await fake.push_event(event)
        await fake.push_event(message(fake, "marker", channel="C200"))
        assert (await inbox.get()).text == "marker"
        assert len(inbox.items) == 1


async def test_commands_addressed_to_the_bot_are_normalised(fake: FakeSlack) -> None:
    async with running(fake) as (_, inbox):
        await fake.push_event(message(fake, "/stop@perch"))
        await fake.push_event(message(fake, f"<@{BOT_USER_ID}> /stopall@Perch now", channel="C200"))
        await fake.push_event(message(fake, "/stop@otherbot"))
        texts = [(await inbox.get(n)).text for n in (1, 2, 3)]
        assert sorted(texts) == sorted(["/stop", "/stopall now", "/stop@otherbot"])


async def test_image_reaches_inbound_downloaded_with_the_bot_token(fake: FakeSlack) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    async with running(fake) as (_, inbox):
        file = fake.add_file("cat.png", png, "image/png")
        await fake.push_event(message(fake, "look", subtype="file_share", files=[file]))
        got = await inbox.get()
        assert got.images == (Image("image/png", png),)
        assert got.text == "look"
        [download] = fake.calls_to("files:cat.png")
        assert download.token == "xoxb-test"


async def test_the_bot_token_is_not_sent_to_a_foreign_file_host(fake: FakeSlack) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    async with running(fake) as (_, inbox):
        file = fake.add_file("x.png", b"\x89PNG\r\n\x1a\n", "image/png")
        file["url_private"] = f"http://127.0.0.1:{closed_port}/files/x.png"
        await fake.push_event(message(fake, "", subtype="file_share", files=[file]))
        got = await inbox.get()
        assert got.images == ()
        assert got.text == "[image could not be downloaded: unexpected file host]"


async def test_too_large_images_are_dropped_with_a_note(fake: FakeSlack) -> None:
    async with running(fake, max_image_bytes=1_000_000) as (_, inbox):
        big = fake.add_file("big.jpg", bytes(2_500_000), "image/jpeg")
        await fake.push_event(message(fake, "", subtype="file_share", files=[big]))
        got = await inbox.get()
        assert got.images == ()
        assert got.text == "[image too large: 2.5 MB, limit 1 MB]"
        assert fake.calls_to("files:big.jpg") == []

        unsized = fake.add_file("unsized.png", bytes(1_200_000), "image/png")
        del unsized["size"]
        await fake.push_event(message(fake, "hm", subtype="file_share", files=[unsized]))
        got = await inbox.get(2)
        assert got.images == ()
        assert got.text == "hm\n[image too large: over 1 MB, limit 1 MB]"


async def test_slash_command_becomes_a_mentioned_inbound_in_its_channel(fake: FakeSlack) -> None:
    async with running(fake, slash_command="/perch") as (_, inbox):
        await fake.push_slash_command("/perch", "/stop", "C200", "UALICE")
        got = await inbox.get()
        assert got.text == "/stop"
        assert got.mentioned
        assert got.sender_name == "alice"
        assert got.chat == ChatRef("slack", TEAM_ID, "group", "C200")


# -- sending ---------------------------------------------------------------------------------


async def test_long_reply_is_split_into_ordered_chunks_in_the_thread(fake: FakeSlack) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(20))
    expected = [render_slack_mrkdwn(chunk) for chunk in split_markdown(text, 4000)]
    assert len(expected) > 2
    async with running(fake) as (channel, _):
        await channel.send(Outbound(group_chat(), text))
        calls = fake.calls_to("chat.postMessage")
        assert [call.params["text"] for call in calls] == expected
        assert {call.params["thread_ts"] for call in calls} == {"1700000000.000001"}
        assert all(len(call.params["text"]) <= 4000 for call in calls)


async def test_rejected_formatting_is_resent_as_plain_text(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", status=200, retry_after=None, error="invalid_blocks")
    markdown = "Some **bold** and a <tag> & more"
    async with running(fake) as (channel, _):
        await channel.send(Outbound(group_chat(), markdown))
        first, second = fake.calls_to("chat.postMessage")
        assert first.params["text"] == render_slack_mrkdwn(markdown)
        plain = render_plain(markdown).replace("&", "&amp;").replace("<", "&lt;")
        assert second.params["text"] == plain.replace(">", "&gt;")
        assert second.params["mrkdwn"] is False
        assert len(fake.messages) == 1


async def test_rate_limit_is_waited_out_and_the_message_delivered_once(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", status=429, retry_after=1)
    async with running(fake) as (channel, _):
        started = time.monotonic()
        await channel.send(Outbound(group_chat(), "after the wait"))
        assert time.monotonic() - started >= 1.0
        assert len(fake.calls_to("chat.postMessage")) == 2
        assert [m.text for m in fake.messages.values()] == [render_slack_mrkdwn("after the wait")]


async def test_cut_connection_is_retried_and_the_message_delivered_once(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", disconnect=True)
    async with running(fake) as (channel, _):
        await channel.send(Outbound(group_chat(), "second try"))
        assert len(fake.calls_to("chat.postMessage")) == 2
        assert len(fake.messages) == 1


async def test_permanent_refusal_raises_an_actionable_error(fake: FakeSlack) -> None:
    fake.fail_next("chat.postMessage", status=200, retry_after=None, error="not_in_channel")
    async with running(fake) as (channel, _):
        with pytest.raises(SlackDeliveryError, match=r"C200 \(not_in_channel\): invite the bot"):
            await channel.send(Outbound(group_chat(), "hello?"))


async def test_a_slow_chat_does_not_hold_up_another(fake: FakeSlack) -> None:
    release = fake.hold("CSLOW")
    async with running(fake) as (channel, _):
        slow_chat = ChatRef("slack", TEAM_ID, "dm", "CSLOW")
        slow = asyncio.create_task(channel.send(Outbound(slow_chat, "slow")))
        await fake.wait_for("chat.postMessage")
        await asyncio.wait_for(channel.send(Outbound(group_chat(), "fast")), 3.0)
        assert not slow.done()
        release.set()
        await asyncio.wait_for(slow, 3.0)
        assert len(fake.messages) == 2


async def test_stream_posts_one_preview_edits_it_and_finalises_in_place(fake: FakeSlack) -> None:
    async with running(fake) as (channel, _):
        stream = channel.reply_stream(group_chat())
        await stream.update("Hel")
        await fake.wait_for("chat.postMessage")
        await stream.update("Hello wor")
        await fake.wait_for("chat.update")
        await stream.finish("Hello **world**, done")
        await stream.finish("Hello **world**, done")

        [post] = fake.calls_to("chat.postMessage")
        [posted] = fake.messages.values()
        assert post.params["text"] == render_slack_mrkdwn("Hel")
        updates = fake.calls_to("chat.update")
        assert {call.params["ts"] for call in updates} == {posted.ts}
        assert posted.text == render_slack_mrkdwn("Hello **world**, done")
        assert posted.edits[0] == render_slack_mrkdwn("Hello wor")


async def test_stream_edits_wait_for_the_interval_and_show_the_latest_text(
    fake: FakeSlack,
) -> None:
    async with running(fake, stream_interval=0.3) as (channel, _):
        stream = channel.reply_stream(group_chat())
        await stream.update("a")
        [post] = await fake.wait_for("chat.postMessage")
        for text in ("ab", "abc", "abcd"):
            await stream.update(text)
        [edit] = await fake.wait_for("chat.update")
        assert edit.at - post.at >= 0.3
        assert edit.params["text"] == render_slack_mrkdwn("abcd")
        await stream.finish("abcde")
        assert [call.params["text"] for call in fake.calls_to("chat.update")] == [
            render_slack_mrkdwn("abcd"),
            render_slack_mrkdwn("abcde"),
        ]


async def test_stream_finish_does_not_wait_for_the_interval(fake: FakeSlack) -> None:
    async with running(fake, stream_interval=30.0) as (channel, _):
        stream = channel.reply_stream(group_chat())
        started = time.monotonic()
        await stream.update("a")
        await fake.wait_for("chat.postMessage")
        await stream.update("ab")
        await stream.finish("abc")
        assert time.monotonic() - started < 5.0
        assert len(fake.calls_to("chat.postMessage")) == 1
        assert [call.params["text"] for call in fake.calls_to("chat.update")] == [
            render_slack_mrkdwn("abc")
        ]


async def test_stream_final_text_longer_than_a_chunk_continues_in_new_messages(
    fake: FakeSlack,
) -> None:
    final = "\n\n".join(f"Part {i} " + "x" * 120 for i in range(6))
    chunks = split_markdown(final, 300)
    assert len(chunks) >= 3
    async with running(fake, chunk_limit=300) as (channel, _):
        stream = channel.reply_stream(group_chat())
        await stream.update("Part 0")
        await fake.wait_for("chat.postMessage")
        await stream.finish(final)
        texts = [m.text for m in fake.messages.values()]
        assert texts == [render_slack_mrkdwn(chunk) for chunk in chunks]


async def test_streaming_off_sends_only_the_final_text(fake: FakeSlack) -> None:
    async with running(fake, streaming="off") as (channel, _):
        stream = channel.reply_stream(group_chat())
        assert isinstance(stream, FinalOnlyStream)
        await stream.update("partial")
        await stream.finish("final")
        assert [m.text for m in fake.messages.values()] == [render_slack_mrkdwn("final")]
        assert fake.calls_to("chat.update") == []


async def test_typing_sets_the_thread_status_and_clears_it_on_exit(fake: FakeSlack) -> None:
    chat = group_chat()
    async with running(fake) as (channel, _):
        async with channel.typing(chat):
            calls = await fake.wait_for("assistant.threads.setStatus", 2)
        assert calls[0].params == {
            "channel_id": "C200",
            "thread_ts": "1700000000.000001",
            "status": TYPING_STATUS,
        }
        assert fake.calls_to("assistant.threads.setStatus")[-1].params["status"] == ""

        count = len(fake.calls_to("assistant.threads.setStatus"))
        with pytest.raises(RuntimeError, match="turn failed"):
            async with channel.typing(chat):
                await fake.wait_for("assistant.threads.setStatus", count + 1)
                raise RuntimeError("turn failed")
        assert fake.calls_to("assistant.threads.setStatus")[-1].params["status"] == ""

        count = len(fake.calls_to("assistant.threads.setStatus"))
        async with channel.typing(ChatRef("slack", TEAM_ID, "dm", "D100", None, "1.2")):
            pass
        assert len(fake.calls_to("assistant.threads.setStatus")) == count


async def test_typing_switches_itself_off_when_slack_refuses_it(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail_next(
        "assistant.threads.setStatus", status=200, retry_after=None, error="missing_scope"
    )
    caplog.set_level(logging.INFO, logger="channels.slack")
    async with running(fake) as (channel, _):
        async with channel.typing(group_chat()):
            await eventually(lambda: "typing indicator (it needs the chat:write" in caplog.text)
        async with channel.typing(group_chat()):
            pass
        assert len(fake.calls_to("assistant.threads.setStatus")) == 1


# -- connection ------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean-close", "abrupt-reset"])
async def test_socket_reconnects_after_a_drop_and_receives_the_next_event(
    fake: FakeSlack, clean: bool
) -> None:
    async with running(fake) as (channel, inbox):
        await fake.wait_connections(1)
        await fake.drop_socket(clean)
        await fake.wait_connections(2)
        await fake.push_event(message(fake, "still there?"))
        assert (await inbox.get()).text == "still there?"
        await eventually(lambda: channel.status().up)


async def test_status_is_down_while_slack_is_unreachable_and_up_once_it_appears() -> None:
    fake = FakeSlack()
    await fake.start()
    port = fake.port
    await fake.stop()
    channel = SlackChannel(make_options(fake, connect_timeout=0.5))
    inbox = Inbox()
    try:
        started = time.monotonic()
        await channel.start(inbox)
        assert time.monotonic() - started < 2.0
        status = channel.status()
        assert not status.up
        assert "cannot reach Slack" in status.detail
        assert "xoxb-test" not in status.detail

        await fake.start(port)
        await eventually(lambda: channel.status().up, timeout=10.0)
        await fake.push_event(message(fake, "you are back"))
        assert (await inbox.get()).text == "you are back"
    finally:
        await channel.stop()
        await fake.stop()


async def test_stop_is_prompt_and_cancels_handlers_still_running(fake: FakeSlack) -> None:
    entered = asyncio.Event()

    async def stuck(_: Inbound) -> None:
        entered.set()
        await asyncio.Event().wait()

    before = asyncio.all_tasks()
    channel = SlackChannel(make_options(fake))
    await channel.start(stuck)
    await fake.push_event(message(fake, "take your time"))
    await asyncio.wait_for(entered.wait(), 5.0)
    started = time.monotonic()
    await channel.stop()
    assert time.monotonic() - started < 2.0
    assert not channel.status().up
    left = {task for task in asyncio.all_tasks() - before if not task.done()}
    assert left == set()


async def test_http_mode_accepts_signed_events_and_rejects_unsigned_ones(fake: FakeSlack) -> None:
    inbox = Inbox()
    channel = SlackChannel(
        make_options(fake, mode="http", app_token="", signing_secret="s3cret", http_port=0)
    )
    await channel.start(inbox)
    try:
        assert channel.status().up
        url = channel.http_url
        assert url is not None and url.startswith("http://127.0.0.1:")
        event = message(fake, "over http")
        body = json.dumps(event_payload(event)).encode()
        async with aiohttp.ClientSession() as session:
            plain = {"Content-Type": "application/json"}
            async with session.post(url, data=body, headers=plain) as response:
                assert response.status == 401
            async with session.post(url, data=body, headers=sign("wrong", body)) as response:
                assert response.status == 401
            async with session.post(url, data=body, headers=sign("s3cret", body)) as response:
                assert response.status == 200
            challenge = json.dumps({"type": "url_verification", "challenge": "c123"}).encode()
            async with session.post(url, data=challenge, headers=sign("s3cret", challenge)) as r:
                assert r.status == 200
                assert "c123" in await r.text()
        got = await inbox.get()
        assert got.text == "over http"
        assert got.chat == ChatRef("slack", TEAM_ID, "dm", "D100", None, event["ts"])
        assert len(inbox.items) == 1
    finally:
        await channel.stop()


async def test_http_mode_acks_once_the_message_is_handed_on_or_the_bound_passed(
    fake: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[float] = []
    release = asyncio.Event()

    async def slow_inbox(inbound: Inbound) -> None:  # the daemon writing its inbox row
        if inbound.text == "stuck":
            await release.wait()
        else:
            await asyncio.sleep(0.3)
        handed.append(time.monotonic())

    monkeypatch.setattr(slack_inbound, "ACK_WITHIN", 1.0)
    channel = SlackChannel(
        make_options(fake, mode="http", app_token="", signing_secret="s3cret", http_port=0)
    )
    await channel.start(slow_inbox)
    try:
        url = channel.http_url
        assert url is not None
        async with aiohttp.ClientSession() as session:
            body = json.dumps(event_payload(message(fake, "over http"))).encode()
            async with session.post(url, data=body, headers=sign("s3cret", body)) as response:
                acked = time.monotonic()
                assert response.status == 200
            assert len(handed) == 1 and handed[0] <= acked  # no ack before the hand-off
            body = json.dumps(event_payload(message(fake, "stuck"))).encode()
            started = time.monotonic()
            async with session.post(url, data=body, headers=sign("s3cret", body)) as response:
                assert response.status == 200  # the bound passed: acked anyway
            assert len(handed) == 1 and time.monotonic() - started >= 1.0
    finally:
        release.set()
        await channel.stop()


async def test_http_mode_on_a_busy_port_reports_it_and_keeps_running(fake: FakeSlack) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        channel = SlackChannel(
            make_options(
                fake, mode="http", signing_secret="s3cret", http_port=port, connect_timeout=0.5
            )
        )
        await channel.start(Inbox())
        try:
            status = channel.status()
            assert not status.up
            assert f"cannot listen on 127.0.0.1:{port}" in status.detail
            assert "channels.slack.http_port" in status.detail
        finally:
            await channel.stop()


# -- options and text ------------------------------------------------------------------------


def test_options_refuse_swapped_or_missing_tokens() -> None:
    with pytest.raises(ValueError, match="app-level token"):
        SlackOptions(enabled=True, bot_token="xapp-1-abc", app_token="xapp-1-abc")
    with pytest.raises(ValueError, match="SLACK_APP_TOKEN"):
        SlackOptions(enabled=True, bot_token="xoxb-1")
    with pytest.raises(ValueError, match="SLACK_SIGNING_SECRET"):
        SlackOptions(enabled=True, bot_token="xoxb-1", mode="http")
    with pytest.raises(ValueError, match="slash command"):
        SlackOptions(enabled=True, bot_token="xoxb-1", app_token="xapp-1", slash_command="perch")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"<@{BOT_USER_ID}> hi", ("hi", True)),
        (f"hey <@{BOT_USER_ID}|perch>, there", ("hey there", True)),
        ("ask <@U2> or <@U3|bob>", ("ask @U2 or @bob", False)),
        ("see <#C1|general> and <#C2>", ("see #general and #C2", False)),
        (
            "<https://x.org|the site> and <https://y.org>",
            ("the site (https://x.org) and https://y.org", False),
        ),
        ("<mailto:a@b.c|a@b.c>", ("a@b.c", False)),
        ("<!here> <!subteam^S1|@devs> <!date^1^{date}|Feb 1>", ("@here @devs Feb 1", False)),
        ("a &amp;lt; b &gt; c", ("a &lt; b > c", False)),
        ("/new@perch please", ("/new please", False)),
        ("/new@someoneelse", ("/new@someoneelse", False)),
    ],
)
def test_slack_markup_is_normalised(raw: str, expected: tuple[str, bool]) -> None:
    assert normalise_slack_text(raw, BOT_USER_ID, "perch") == expected


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@given(st.text())
def test_escaped_plain_text_comes_back_unchanged(text: str) -> None:
    assume(not re.match(r"/[A-Za-z0-9_]+@perch(\s|$)", text.strip(), re.IGNORECASE))
    assert normalise_slack_text(_slack_escape(text), BOT_USER_ID, "perch") == (text.strip(), False)


@given(st.text(), st.text(), st.sampled_from(["", "|perch"]))
def test_the_bot_mention_is_always_found_and_removed(before: str, after: str, label: str) -> None:
    raw = f"{_slack_escape(before)}<@{BOT_USER_ID}{label}>{_slack_escape(after)}"
    expected = (before + re.sub(r"\A[:,]?[ \t]*", "", after)).strip()
    assert normalise_slack_text(raw, BOT_USER_ID, "") == (expected, True)
