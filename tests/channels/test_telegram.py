"""The Telegram channel end to end: real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from telegram import MessageEntity, User

from channels.base import ChatRef, FinalOnlyStream, Inbound, Outbound
from channels.chunking import split_markdown
from channels.formatting import render_plain
from channels.telegram.adapter import TelegramChannel
from channels.telegram.errors import TelegramDeliveryError
from channels.telegram.options import TelegramOptions
from channels.telegram.render import render_telegram_html
from channels.telegram.text import strip_bot_mentions
from tests.fakes.telegram import BOT_ID, BOT_USERNAME, FakeTelegram
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(20)

JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 60


def options(tg: FakeTelegram, **overrides: Any) -> TelegramOptions:
    settings: dict[str, Any] = {
        "token": tg.token,
        "base_url": tg.base_url,
        "stream_interval": 0.05,
        "typing_interval": 0.05,
        "retry_backoff": 0.01,
        "reconnect_delay": 0.05,
        "poll_timeout": 1,  # a quiet long poll ends (and proves the API is back) within 1 s
    }
    settings.update(overrides)
    return TelegramOptions(**settings)


class Running:
    """A started channel and the messages it handed on."""

    def __init__(self, channel: TelegramChannel) -> None:
        self.channel = channel
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue()

    async def handle(self, inbound: Inbound) -> None:
        await self.inbox.put(inbound)

    async def next(self, timeout: float = 5.0) -> Inbound:
        return await asyncio.wait_for(self.inbox.get(), timeout)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def run_channel(tg: FakeTelegram) -> AsyncIterator[Callable[..., Any]]:
    started: list[TelegramChannel] = []

    async def start(**overrides: Any) -> Running:
        channel = TelegramChannel(options(tg, **overrides))
        running = Running(channel)
        await channel.start(running.handle)
        started.append(channel)
        return running

    yield start
    for channel in started:
        await channel.stop()


@pytest.fixture
async def bot(run_channel: Callable[..., Any]) -> Running:
    running: Running = await run_channel()
    assert running.channel.status().up
    return running


# -- receiving ---------------------------------------------------------------------------------


async def test_dm_becomes_inbound_and_the_reply_goes_back_to_that_chat(
    tg: FakeTelegram, bot: Running
) -> None:
    sent = tg.dm("hello there", user_id=777, first_name="Grace")
    inbound = await bot.next()
    assert inbound.chat == ChatRef(
        "telegram", str(BOT_ID), "dm", "777", None, str(sent["message_id"])
    )
    assert inbound.text == "hello there"
    assert inbound.sender_id == "777"
    assert inbound.sender_name == "Grace"
    assert inbound.message_id == str(sent["message_id"])
    assert not inbound.mentioned

    await bot.channel.send(Outbound(inbound.chat, "Hi **Grace**"))
    (call,) = tg.calls("sendMessage")
    assert call.params["chat_id"] == 777
    assert call.params["text"] == render_telegram_html("Hi **Grace**")
    assert call.params["parse_mode"] == "HTML"
    assert "reply_parameters" not in call.params  # DMs don't quote


async def test_group_mention_is_flagged_stripped_and_answered_in_the_group_quoting_it(
    tg: FakeTelegram, bot: Running
) -> None:
    sent = tg.group_message("what time is it?", chat_id=-100555, mention=True)
    inbound = await bot.next()
    assert inbound.chat.kind == "group"
    assert inbound.chat.chat_id == "-100555"
    assert inbound.mentioned
    assert inbound.text == "what time is it?"

    await bot.channel.send(Outbound(inbound.chat, "Noon."))
    (call,) = tg.calls("sendMessage")
    assert call.params["chat_id"] == -100555
    assert call.params["reply_parameters"]["message_id"] == sent["message_id"]


async def test_text_mention_of_the_bot_counts_and_is_stripped(
    tg: FakeTelegram, bot: Running
) -> None:
    entity = {
        "type": "text_mention",
        "offset": 4,
        "length": 5,
        "user": {"id": BOT_ID, "is_bot": True, "first_name": "Perch"},
    }
    tg.group_message("hey Perch, look", entities=[entity])
    inbound = await bot.next()
    assert inbound.mentioned
    assert inbound.text == "hey , look"


async def test_unmentioned_group_message_arrives_unmentioned(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.group_message(
        "just chatting @someoneelse", entities=[{"type": "mention", "offset": 14, "length": 12}]
    )
    inbound = await bot.next()
    assert inbound.chat.kind == "group"
    assert not inbound.mentioned
    assert inbound.text == "just chatting @someoneelse"


async def test_reply_to_a_bot_message_counts_as_a_mention(tg: FakeTelegram, bot: Running) -> None:
    earlier = tg.bot_message("I said this", chat_id=-1001234)
    tg.group_message("why?", reply_to=earlier)
    inbound = await bot.next()
    assert inbound.mentioned
    assert inbound.text == "why?"


async def test_forum_topic_is_a_thread_and_answers_go_to_that_topic(
    tg: FakeTelegram, bot: Running
) -> None:
    # Topic messages "reply" to the topic's root; that root being the bot's is not a mention.
    root = tg.bot_message("Topic", chat_id=-1001234) | {
        "forum_topic_created": {"name": "T", "icon_color": 1}
    }
    tg.group_message("in the topic", thread_id=77, reply_to=root)
    inbound = await bot.next()
    assert inbound.chat.thread_id == "77"
    assert not inbound.mentioned

    async with bot.channel.typing(inbound.chat):
        await tg.wait_for("sendChatAction")
    await bot.channel.send(Outbound(inbound.chat, "answer"))
    assert tg.calls("sendChatAction")[0].params["message_thread_id"] == 77
    assert tg.calls("sendMessage")[0].params["message_thread_id"] == 77


async def test_own_messages_edits_and_channel_posts_are_ignored(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.group_message("from myself", from_bot=True)
    tg.dm("edited text", kind="edited_message")
    tg.push_update(
        {
            "channel_post": {
                "message_id": 5,
                "date": 0,
                "chat": {"id": -1009, "type": "channel"},
                "text": "news",
            }
        }
    )
    tg.dm("the real one")
    inbound = await bot.next()
    assert inbound.text == "the real one"
    assert bot.inbox.empty()


async def test_command_with_the_bot_name_is_normalised_and_other_bots_commands_dropped(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.group_message("/stop@otherbot")
    tg.group_message(f"/stop@{BOT_USERNAME} now")
    inbound = await bot.next()
    assert inbound.text == "/stop now"
    assert inbound.mentioned
    assert bot.inbox.empty()


async def test_caption_is_text_and_the_largest_photo_under_the_cap_reaches_images(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    bot: Running = await run_channel(max_image_bytes=1000)
    tg.add_file("small", JPEG)
    tg.add_file("medium", JPEG + b"\x01" * 100, "photos/medium.jpg")
    tg.add_file("huge", JPEG + b"\x01" * 5000)
    photo = [
        {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 64},
        {"file_id": "medium", "file_unique_id": "m", "width": 320, "height": 320, "file_size": 164},
        {
            "file_id": "huge",
            "file_unique_id": "h",
            "width": 1280,
            "height": 1280,
            "file_size": 5064,
        },
    ]
    tg.dm(None, photo=photo, caption="what is this?")
    inbound = await bot.next()
    assert inbound.text == "what is this?"
    assert [(i.media_type, i.data) for i in inbound.images] == [
        ("image/jpeg", JPEG + b"\x01" * 100)
    ]
    assert [c.params["path"] for c in tg.calls("download")] == ["photos/medium.jpg"]


async def test_image_document_over_the_cap_is_dropped_with_a_note(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    bot: Running = await run_channel(max_image_bytes=5_000_000)
    document = {
        "file_id": "big",
        "file_unique_id": "b",
        "mime_type": "image/png",
        "file_size": 9_100_000,
    }
    tg.dm(None, document=document, caption="look")
    inbound = await bot.next()
    assert inbound.images == ()
    assert inbound.text == "look\n[image too large: 9.1 MB, limit 5 MB]"
    assert not tg.calls("getFile")


async def test_png_document_reaches_images_with_its_type(tg: FakeTelegram, bot: Running) -> None:
    tg.add_file("png", PNG)
    tg.dm(
        None,
        document={
            "file_id": "png",
            "file_unique_id": "p",
            "mime_type": "image/png",
            "file_size": len(PNG),
        },
    )
    inbound = await bot.next()
    assert [(i.media_type, i.data) for i in inbound.images] == [("image/png", PNG)]
    assert inbound.text == ""


async def test_a_slow_image_download_keeps_order_in_its_chat_and_blocks_no_other_chat(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.add_file("slow", JPEG)
    tg.download_gate = asyncio.Event()
    photo = [{"file_id": "slow", "file_unique_id": "s", "width": 9, "height": 9, "file_size": 64}]
    tg.dm(None, user_id=1, photo=photo, caption="first")
    tg.dm("second", user_id=1)
    tg.dm("elsewhere", user_id=2)
    assert (await bot.next()).text == "elsewhere"
    tg.download_gate.set()
    first, second = await bot.next(), await bot.next()
    assert (first.text, len(first.images), second.text) == ("first", 1, "second")


# -- sending -----------------------------------------------------------------------------------


async def test_long_reply_is_sent_as_ordered_chunks_within_the_limit(
    tg: FakeTelegram, bot: Running
) -> None:
    text = "\n\n".join(f"Paragraph {i}: " + "word " * 60 for i in range(40))
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    await bot.channel.send(Outbound(chat, text))
    expected = [render_telegram_html(c) for c in split_markdown(text, 4000)]
    assert len(expected) > 1
    assert tg.texts() == expected
    assert all(len(t) <= 4096 for t in tg.texts())


async def test_markup_that_renders_to_nothing_is_sent_as_written(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    await bot.channel.send(Outbound(chat, "```\n```"))
    (sent,) = tg.calls("sendMessage", ok_only=False)
    assert sent.status == 200
    assert sent.params["text"] == "```\n```" and "parse_mode" not in sent.params


async def test_html_rejected_by_telegram_is_resent_as_plain_text(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.reject_parse_mode_once()
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    await bot.channel.send(Outbound(chat, "**bold** and `code`"))
    failed, delivered = tg.calls("sendMessage", ok_only=False)
    assert failed.status == 400 and failed.params["parse_mode"] == "HTML"
    assert delivered.ok and "parse_mode" not in delivered.params
    assert delivered.params["text"] == render_plain("**bold** and `code`")


async def test_flood_wait_is_waited_out_and_the_message_delivered_once(
    tg: FakeTelegram, bot: Running
) -> None:
    tg.fail_next("sendMessage", 429, retry_after=0.3)
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    await bot.channel.send(Outbound(chat, "patience"))
    limited, delivered = tg.calls("sendMessage", ok_only=False)
    assert limited.status == 429
    assert delivered.at - limited.at >= 0.3
    assert tg.texts() == [render_telegram_html("patience")]


async def test_network_errors_on_send_are_retried_then_reported(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    tg.fail_next("sendMessage", 502, times=2)
    await bot.channel.send(Outbound(chat, "eventually"))
    assert tg.texts() == [render_telegram_html("eventually")]

    tg.fail_next("sendMessage", 502, times=5)
    with pytest.raises(TelegramDeliveryError, match=r"chat 42.*unreachable after 5 attempts"):
        await bot.channel.send(Outbound(chat, "never"))


async def test_a_chat_held_by_a_flood_wait_does_not_block_another_chat(
    tg: FakeTelegram, bot: Running
) -> None:
    slow = ChatRef("telegram", str(BOT_ID), "dm", "1")
    fast = ChatRef("telegram", str(BOT_ID), "dm", "2")
    tg.fail_next("sendMessage", 429, retry_after=0.5, when=lambda p: p["chat_id"] == 1)
    slow_send = asyncio.create_task(bot.channel.send(Outbound(slow, "slow")))
    await tg.wait_for("sendMessage", ok_only=False)
    await bot.channel.send(Outbound(fast, "fast"))
    assert not slow_send.done()
    await slow_send
    assert [c.params["chat_id"] for c in tg.calls("sendMessage")] == [2, 1]


async def test_typing_is_refreshed_while_working_and_stops_after(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    async with bot.channel.typing(chat):
        await tg.wait_for("sendChatAction", 3)
    count = len(tg.calls("sendChatAction"))
    await asyncio.sleep(0.15)  # three refresh intervals: none may come
    assert len(tg.calls("sendChatAction")) == count
    assert tg.calls("sendChatAction")[0].params["action"] == "typing"


async def test_typing_stops_when_the_turn_fails(tg: FakeTelegram, bot: Running) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    with pytest.raises(RuntimeError):
        async with bot.channel.typing(chat):
            await tg.wait_for("sendChatAction")
            raise RuntimeError("turn failed")
    count = len(tg.calls("sendChatAction"))
    await asyncio.sleep(0.15)
    assert len(tg.calls("sendChatAction")) == count


# -- streaming ---------------------------------------------------------------------------------


async def test_streamed_reply_previews_once_edits_then_finalises_in_place(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    await stream.update("Hel")
    (preview,) = await tg.wait_for("sendMessage")
    for text in ("Hello", "Hello wor", "Hello world"):
        await stream.update(text)
    (edit,) = await tg.wait_for("editMessageText")
    await stream.finish("Hello **world**!")

    assert len(tg.calls("sendMessage")) == 1
    edits = tg.calls("editMessageText")
    assert preview.params["text"] == render_telegram_html("Hel")
    assert edit.params["text"] == render_telegram_html("Hello world")
    assert edit.at - preview.at >= 0.05  # stream_interval
    assert edits[-1].params["text"] == render_telegram_html("Hello **world**!")
    assert {e.params["message_id"] for e in edits} == {edits[0].params["message_id"]}


async def test_final_text_already_shown_by_the_preview_is_not_edited_again(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    await stream.update("Done.")
    await tg.wait_for("sendMessage")
    await stream.finish("Done.")
    assert tg.texts() == [render_telegram_html("Done.")]
    assert tg.calls("editMessageText", ok_only=False) == []


async def test_stream_updates_faster_than_the_interval_are_not_each_edited(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    bot: Running = await run_channel(stream_interval=1.0)
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    words = [f"word{i}" for i in range(10)]
    for i in range(1, len(words) + 1):
        await stream.update(" ".join(words[:i]))
        await asyncio.sleep(0.01)  # a model streaming tokens
    await stream.finish(" ".join(words))
    assert len(tg.calls("sendMessage")) == 1
    (final,) = tg.calls("editMessageText")  # no edit within the interval, then the final one
    assert final.params["text"] == render_telegram_html(" ".join(words))


async def test_streamed_reply_longer_than_a_chunk_sends_the_rest_after_the_preview(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    bot: Running = await run_channel(chunk_limit=100)
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    await stream.update("start")
    await tg.wait_for("sendMessage")
    final = "\n\n".join(f"paragraph {i} " + "x" * 40 for i in range(5))
    await stream.finish(final)
    chunks = split_markdown(final, 100)
    assert len(chunks) > 1
    assert tg.calls("editMessageText")[-1].params["text"] == render_telegram_html(chunks[0])
    assert tg.texts() == [render_telegram_html("start")] + [
        render_telegram_html(c) for c in chunks[1:]
    ]


async def test_streaming_off_sends_only_the_final_text(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    bot: Running = await run_channel(streaming="off")
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    assert isinstance(stream, FinalOnlyStream)
    await stream.update("partial")
    await stream.finish("final")
    assert tg.texts() == [render_telegram_html("final")]
    assert not tg.calls("editMessageText")


async def test_aborted_stream_keeps_the_preview_and_sends_nothing_more(
    tg: FakeTelegram, bot: Running
) -> None:
    chat = ChatRef("telegram", str(BOT_ID), "dm", "42")
    stream = bot.channel.reply_stream(chat)
    await stream.update("thinking")
    await tg.wait_for("sendMessage")
    await stream.update("thinking more")
    await stream.abort()
    await stream.update("too late")
    assert tg.texts() == [render_telegram_html("thinking")]
    assert all(
        e.params["text"] != render_telegram_html("too late") for e in tg.calls("editMessageText")
    )


# -- connection --------------------------------------------------------------------------------


async def test_polling_survives_the_server_going_away_and_the_next_message_arrives(
    tg: FakeTelegram, bot: Running
) -> None:
    port = tg.port
    await tg.stop()
    await eventually(lambda: not bot.channel.status().up)
    assert "polling failed" in bot.channel.status().detail
    await tg.start(port)
    tg.dm("are you back?")
    inbound = await bot.next(timeout=10)
    assert inbound.text == "are you back?"
    assert bot.channel.status().up


async def test_bad_gateway_on_polling_marks_the_channel_down_until_it_recovers(
    tg: FakeTelegram, bot: Running, caplog: pytest.LogCaptureFixture
) -> None:
    def went_down() -> bool:
        return any(
            r.levelno == logging.WARNING and "telegram down: polling failed" in r.getMessage()
            for r in caplog.records
        )

    caplog.set_level(logging.INFO, logger="channels.telegram")
    tg.fail_next("getUpdates", 502, description="Bad Gateway")
    tg.dm("wake the poll")  # answers a held poll, so a later one meets the 502
    await bot.next()
    await eventually(went_down)
    await eventually(lambda: bot.channel.status().up, timeout=10)
    tg.dm("still there")
    assert (await bot.next()).text == "still there"
    assert any("telegram up" in r.getMessage() for r in caplog.records)


async def test_unreachable_at_start_is_down_then_up_when_the_api_appears(
    tg: FakeTelegram,
) -> None:
    port = tg.port
    await tg.stop()
    channel = TelegramChannel(options(tg))
    running = Running(channel)
    began = time.monotonic()
    await channel.start(running.handle)
    try:
        assert time.monotonic() - began < 5
        assert not channel.status().up
        assert "cannot reach the Bot API" in channel.status().detail
        await tg.start(port)
        await eventually(lambda: channel.status().up)
        tg.dm("first message")
        assert (await running.next()).text == "first message"
    finally:
        await channel.stop()


async def test_rejected_token_is_reported_and_not_retried(tg: FakeTelegram) -> None:
    channel = TelegramChannel(options(tg, token="999:WRONG"))
    await channel.start(Running(channel).handle)
    try:
        assert not channel.status().up
        assert "token" in channel.status().detail
        assert "WRONG" not in channel.status().detail
    finally:
        await channel.stop()
    assert len(tg.calls("getMe", ok_only=False)) == 1


def _not_the_fakes(tasks: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks other than the fake server's own (aiohttp connection handlers, notifications)."""

    def source(task: asyncio.Task[Any]) -> str:
        code = getattr(task.get_coro(), "cr_code", None)
        return code.co_filename if code is not None else ""

    return {t for t in tasks if "aiohttp" not in source(t) and "fakes" not in source(t)}


async def test_stop_is_prompt_and_leaves_no_tasks(tg: FakeTelegram) -> None:
    before = asyncio.all_tasks()
    channel = TelegramChannel(options(tg, stream_interval=5.0))
    running = Running(channel)
    await channel.start(running.handle)
    tg.dm("hi")
    inbound = await running.next()
    stream = channel.reply_stream(inbound.chat)
    await stream.update("half")
    await tg.wait_for("sendMessage")
    await stream.update("half written")  # the preview now waits out its interval
    began = time.monotonic()
    await channel.stop()
    assert time.monotonic() - began < 2
    assert not channel.status().up
    await eventually(lambda: not _not_the_fakes(asyncio.all_tasks() - before), timeout=1)
    await stream.abort()  # after stop: returns at once, sends nothing
    assert not tg.calls("editMessageText")


async def test_webhook_mode_takes_posts_with_the_secret_and_refuses_others(
    tg: FakeTelegram, run_channel: Callable[..., Any]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bot: Running = await run_channel(
        mode="webhook",
        webhook_url="https://bot.example/tg/hook",
        webhook_secret="s3cret-token",
        webhook_port=port,
    )
    assert tg.webhook is not None
    assert tg.webhook["url"] == "https://bot.example/tg/hook"
    assert tg.webhook["secret_token"] == "s3cret-token"
    assert bot.channel.status().up
    update = {
        "update_id": 1,
        "message": {
            "message_id": 9,
            "date": 0,
            "chat": {"id": 5, "type": "private"},
            "from": {"id": 5, "is_bot": False, "first_name": "W"},
            "text": "via hook",
        },
    }
    url = f"http://127.0.0.1:{port}/tg/hook"
    async with aiohttp.ClientSession() as http:
        async with http.post(
            url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "nope"}
        ) as refused:
            assert refused.status == 403
        async with http.post(
            url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}
        ) as taken:
            assert taken.status == 200
    inbound = await bot.next()
    assert inbound.text == "via hook"
    assert bot.inbox.empty()
    assert not tg.calls("getUpdates", ok_only=False)


async def test_the_token_never_reaches_the_logs(
    tg: FakeTelegram, run_channel: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    bot: Running = await run_channel()
    tg.fail_next("sendMessage", 502)
    tg.dm("hi")
    inbound = await bot.next()
    await bot.channel.send(Outbound(inbound.chat, "hello"))
    await bot.channel.stop()
    secret = tg.token.split(":", 1)[1]
    assert any("getUpdates" in r.getMessage() for r in caplog.records)  # httpx logged URLs
    assert secret not in caplog.text


# -- options and text handling -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"token": ""}, "token is empty"),
        ({"token": "not-a-token"}, "does not look like a bot token"),
        ({"mode": "webhook", "webhook_url": "https://x.example/h"}, "webhook_secret"),
        ({"mode": "webhook", "webhook_secret": "abc"}, "webhook_url"),
    ],
)
def test_bad_options_say_which_key_to_fix(overrides: dict[str, Any], message: str) -> None:
    settings: dict[str, Any] = {"enabled": True, "token": "1:abc"} | overrides
    with pytest.raises(ValueError, match=message):
        TelegramOptions(**settings)


def test_file_url_is_derived_from_the_base_url() -> None:
    assert TelegramOptions(token="1:a").file_url == "https://api.telegram.org/file/bot"
    local = TelegramOptions(token="1:a", base_url="http://127.0.0.1:8081/bot")
    assert local.file_url == "http://127.0.0.1:8081/file/bot"


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


_words = st.text(
    alphabet=st.characters(exclude_characters="@/", exclude_categories=["Cs"]), max_size=30
)


def _content(text: str) -> str:
    """Text without whitespace or a leading "," / ":" (what stripping may drop)."""
    return "".join(text.split()).lstrip(",:")


@given(before=_words, after=_words)
def test_the_bots_mention_is_removed_wherever_it_stands(before: str, after: str) -> None:
    handle = "@" + BOT_USERNAME.upper()  # Telegram usernames are case-insensitive
    entity = MessageEntity("mention", _utf16_len(before), _utf16_len(handle))
    stripped, mentioned = strip_bot_mentions(
        before + handle + after, [entity], BOT_USERNAME, BOT_ID
    )
    assert mentioned
    assert "@" not in stripped
    assert stripped == stripped.strip()
    assert _content(stripped) == _content(before + after)
    if not before.strip() and not after.lstrip().startswith((",", ":")):
        assert stripped == after.strip()


@given(before=_words, after=_words)
def test_mentions_of_others_and_of_the_bot_by_id_are_told_apart(before: str, after: str) -> None:
    other = before + "@someone" + after
    entity = MessageEntity("mention", _utf16_len(before), len("@someone"))
    assert strip_bot_mentions(other, [entity], BOT_USERNAME, BOT_ID) == (other.strip(), False)
    named = before + "Perch" + after
    bot_user = User(BOT_ID, "Perch", True)
    entity = MessageEntity("text_mention", _utf16_len(before), 5, user=bot_user)
    stripped, mentioned = strip_bot_mentions(named, [entity], BOT_USERNAME, BOT_ID)
    assert mentioned
    assert _content(stripped) == _content(before + after)


@given(command=st.from_regex(r"[a-z_]{1,10}", fullmatch=True), rest=_words)
def test_commands_lose_the_bot_name_only(command: str, rest: str) -> None:
    text = f"/{command}@{BOT_USERNAME} {rest}"
    assert strip_bot_mentions(text, [], BOT_USERNAME, BOT_ID) == (
        f"/{command} {rest}".strip(),
        True,
    )
    other = f"/{command}@otherbot {rest}"
    assert strip_bot_mentions(other, [], BOT_USERNAME, BOT_ID) == (other.strip(), False)
