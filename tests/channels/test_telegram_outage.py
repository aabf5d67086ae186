"""Telegram under pressure: flood waits per chat, and outages that read well in the log.

Real python-telegram-bot against the fake Bot API; the fake stamps every answer, so "no call
before the not-before time" is read from its timestamps, never from sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from telegram.error import RetryAfter, TimedOut

from channels.base import ChatRef, Outbound
from channels.telegram.adapter import TelegramChannel
from channels.telegram.errors import TelegramDeliveryError
from channels.telegram.flood import FloodControl
from channels.telegram.options import TelegramOptions
from channels.telegram.polling import UPDATER_LOGGER
from channels.telegram.render import render_telegram_html
from tests.fakes.telegram import BOT_ID, Call, FakeTelegram
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(20)

FLOOD_WAIT = 0.5
CHAT = ChatRef("telegram", str(BOT_ID), "dm", "42")
BAD_GATEWAY_PAGE = (
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    "</body>\r\n</html>\r\n"
)


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
async def channel(tg: FakeTelegram) -> AsyncIterator[TelegramChannel]:
    settings: dict[str, Any] = {
        "token": tg.token,
        "base_url": tg.base_url,
        "stream_interval": 0.05,
        "typing_interval": 0.05,
        "retry_backoff": 0.01,
        "reconnect_delay": 0.05,
        "poll_timeout": 1,
    }
    started = TelegramChannel(TelegramOptions(**settings))

    async def ignore(_: object) -> None:
        return None

    await started.start(ignore)
    assert started.status().up
    yield started
    await started.stop()


def calls_to_chat_after(tg: FakeTelegram, limited: Call, chat_id: int = 42) -> list[Call]:
    """Every call to `chat_id` the fake answered after the 429 (whatever its method)."""
    return [
        call
        for call in tg.sent
        if call.params.get("chat_id") == chat_id and call.at > limited.at and call is not limited
    ]


def assert_nothing_reached_the_chat_before_the_wait_ended(tg: FakeTelegram, limited: Call) -> None:
    later = calls_to_chat_after(tg, limited)
    assert later, "nothing was sent after the flood wait"
    early = [
        (c.method, round(c.at - limited.at, 3)) for c in later if c.at - limited.at < FLOOD_WAIT
    ]
    assert not early, f"calls went out during the flood wait: {early}"


# -- flood control -------------------------------------------------------------------------------


async def test_a_429_on_a_preview_edit_holds_the_final_answer_until_the_wait_is_over(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    stream = channel.reply_stream(CHAT)
    await stream.update("Hel")
    await tg.wait_for("sendMessage")
    tg.fail_next("editMessageText", 429, retry_after=FLOOD_WAIT)
    await stream.update("Hello")
    (limited,) = await tg.wait_for("editMessageText", ok_only=False)
    await stream.update("Hello wor")  # under the flood wait: skipped, not queued
    await stream.finish("Hello **world**!")

    assert limited.status == 429
    assert_nothing_reached_the_chat_before_the_wait_ended(tg, limited)
    final = tg.calls("editMessageText")[-1]
    assert final.params["text"] == render_telegram_html("Hello **world**!")
    assert len(tg.calls("sendMessage")) == 1  # the preview was finalised in place


async def test_a_429_on_the_first_preview_holds_the_final_send_message(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    tg.fail_next("sendMessage", 429, retry_after=FLOOD_WAIT)
    stream = channel.reply_stream(CHAT)
    await stream.update("Thinking")
    (limited,) = await tg.wait_for("sendMessage", ok_only=False)
    await stream.finish("The answer.")

    assert limited.status == 429
    assert_nothing_reached_the_chat_before_the_wait_ended(tg, limited)
    assert tg.texts() == [render_telegram_html("The answer.")]


async def test_a_429_on_typing_holds_the_next_send_and_typing_pauses_meanwhile(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    tg.fail_next("sendChatAction", 429, retry_after=FLOOD_WAIT)
    async with channel.typing(CHAT):
        (limited,) = await tg.wait_for("sendChatAction", ok_only=False)
        await channel.send(Outbound(CHAT, "done"))

    assert limited.status == 429
    assert_nothing_reached_the_chat_before_the_wait_ended(tg, limited)
    assert tg.texts() == [render_telegram_html("done")]


async def test_a_flood_wait_in_one_chat_does_not_hold_another(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    other = ChatRef("telegram", str(BOT_ID), "dm", "7")
    tg.fail_next("sendChatAction", 429, retry_after=30)
    async with channel.typing(CHAT):
        await tg.wait_for("sendChatAction", ok_only=False)
        await channel.send(Outbound(other, "not held"))  # would time out if held 30 s
    assert [c.params["chat_id"] for c in tg.calls("sendMessage")] == [7]


async def test_a_flood_wait_too_long_to_sit_out_fails_the_next_send_at_once(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    tg.fail_next("sendChatAction", 429, retry_after=600)
    async with channel.typing(CHAT):
        await tg.wait_for("sendChatAction", ok_only=False)
    with pytest.raises(TelegramDeliveryError, match=r"chat 42: Telegram's flood limit asks"):
        await channel.send(Outbound(CHAT, "later"))
    assert tg.calls("sendMessage", ok_only=False) == []


async def test_a_flood_wait_on_a_call_without_a_chat_holds_every_chat() -> None:
    control = FloodControl()
    started: list[float] = []

    async def flooded() -> bool:
        raise RetryAfter(1)

    async def accepted() -> bool:
        started.append(time.monotonic())
        return True

    with pytest.raises(RetryAfter):
        await control.process_request(flooded, (), {}, "getMe", {}, None)
    held_until = control.not_before(None)
    assert control.limited(1) and control.limited("-100200")
    await control.process_request(accepted, (), {}, "sendMessage", {"chat_id": 1}, None)
    assert started[0] >= held_until


async def test_calls_are_paced_to_telegrams_thirty_a_second(tg: FakeTelegram) -> None:
    async def ignore(_: object) -> None:
        return None

    settings: dict[str, Any] = {"token": tg.token, "base_url": tg.base_url, "chunk_limit": 10}
    paced = TelegramChannel(TelegramOptions(**settings))
    await paced.start(ignore)
    try:
        text = "\n\n".join(f"part {i:02d}" for i in range(31))
        await paced.send(Outbound(CHAT, text))
    finally:
        await paced.stop()
    sends = tg.calls("sendMessage")
    assert len(sends) == 31
    # The 31st call waits for the first to be a second old (less the first call's own trip).
    assert sends[30].at - sends[0].at >= 0.9


async def test_a_commands_answer_goes_ahead_of_another_chats_paced_replies(
    tg: FakeTelegram,
) -> None:
    async def ignore(_: object) -> None:
        return None

    settings: dict[str, Any] = {"token": tg.token, "base_url": tg.base_url, "chunk_limit": 10}
    paced = TelegramChannel(TelegramOptions(**settings))
    await paced.start(ignore)
    other = ChatRef("telegram", str(BOT_ID), "dm", "43")
    try:
        flood = asyncio.ensure_future(
            paced.send(Outbound(CHAT, "\n\n".join(f"part {i:02d}" for i in range(40))))
        )
        await eventually(lambda: len(tg.calls("sendMessage")) >= 30, 5)
        # Every slot of this second is taken: a plain reply to another chat waits for one,
        # a command's answer does not.
        plain = asyncio.ensure_future(paced.send(Outbound(other, "a reply")))
        await paced.send(Outbound(other, "Stopped.", urgent=True))
        answered = time.monotonic()
        await asyncio.gather(flood, plain)
    finally:
        await paced.stop()
    to_other = [c for c in tg.calls("sendMessage") if str(c.params.get("chat_id")) == "43"]
    assert [c.params["text"] for c in to_other] == ["Stopped.", "a reply"]
    to_chat = [c for c in tg.calls("sendMessage") if str(c.params.get("chat_id")) == "42"]
    assert len(to_chat) == 40
    # The answer went out before the flood's 31st call, which had to wait for a free slot.
    assert to_other[0].at < to_chat[30].at
    assert to_chat[30].at - to_chat[0].at >= 0.9
    assert answered < to_chat[30].at


# -- outages in the log --------------------------------------------------------------------------


def telegram_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.startswith(("channels.telegram", "telegram")) and r.levelno >= logging.WARNING
    ]


def assert_concise(records: list[logging.LogRecord]) -> None:
    for record in records:
        text = record.getMessage()
        assert record.exc_info is None and record.exc_text is None, text
        assert "\n" not in text and "<html" not in text.lower() and "nginx" not in text, text


async def test_a_502_page_on_send_logs_one_short_line_per_failure_then_delivers(
    tg: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tg.fail_next("sendMessage", 502, times=2, html=BAD_GATEWAY_PAGE)
    await channel.send(Outbound(CHAT, "hello"))

    lines = telegram_lines(caplog)
    assert_concise(lines)
    assert [r.getMessage() for r in lines] == [
        f"telegram: sendMessage in chat 42 failed (Bad Gateway (HTTP 502)); retry {n}/4 in 0.0 s"
        for n in (1, 2)
    ]
    assert tg.texts() == [render_telegram_html("hello")]


async def test_a_502_page_that_outlasts_the_retries_gives_a_short_delivery_error(
    tg: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tg.fail_next("sendMessage", 502, times=5, html=BAD_GATEWAY_PAGE)
    with pytest.raises(TelegramDeliveryError) as raised:
        await channel.send(Outbound(CHAT, "hello"))
    assert str(raised.value) == (
        "could not send a message to Telegram chat 42: Telegram stayed unreachable after "
        "5 attempts (Bad Gateway (HTTP 502))"
    )
    lines = telegram_lines(caplog)
    assert_concise(lines)
    assert len(lines) == 4  # one per failed attempt that is retried


async def test_a_502_page_on_polling_logs_one_down_line_and_one_up_line(
    tg: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tg.fail_next("getUpdates", 502, html=BAD_GATEWAY_PAGE)
    tg.dm("wake the poll")  # answers the held poll, so the next one meets the 502
    await eventually(lambda: not channel.status().up)
    await eventually(lambda: channel.status().up, timeout=10)

    lines = telegram_lines(caplog)
    assert_concise(lines)
    assert [r.getMessage() for r in lines] == [
        "telegram down: polling failed (Bad Gateway (HTTP 502)); retrying"
    ]
    assert channel.status().detail.startswith("polling as @")


async def test_a_502_page_at_start_shows_in_the_status_and_log_as_one_short_line(
    tg: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async def ignore(_: object) -> None:
        return None

    caplog.set_level(logging.DEBUG)
    tg.fail_next("getMe", 502, times=2, html=BAD_GATEWAY_PAGE)
    settings: dict[str, Any] = {"token": tg.token, "base_url": tg.base_url, "poll_timeout": 1}
    starting = TelegramChannel(TelegramOptions(reconnect_delay=0.05, **settings))
    await starting.start(ignore)
    try:
        await eventually(lambda: starting.status().up)
        lines = telegram_lines(caplog)  # what start-up logged (stopping is another test's)
    finally:
        await starting.stop()
    assert_concise(lines)
    assert [r.getMessage().split(";")[0] for r in lines] == [
        f"telegram down: cannot reach the Bot API at {tg.base_url} (Bad Gateway (HTTP 502))"
    ]


async def test_ptbs_traceback_when_the_last_poll_at_stop_fails_becomes_one_line(
    tg: FakeTelegram, channel: TelegramChannel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    updater = logging.getLogger(UPDATER_LOGGER)
    try:
        raise TimedOut("Timed out")
    except TimedOut:  # what PTB logs (with its traceback) when that call fails
        updater.exception(
            "Error while calling `get_updates` one more time to mark all fetched updates. "
            "Suppressing error to ensure graceful shutdown."
        )
    updater.error("something else entirely")  # other PTB errors are left alone
    lines = [r for r in caplog.records if r.name == UPDATER_LOGGER]
    assert [(r.levelname, r.getMessage()) for r in lines] == [
        ("WARNING", "telegram: the last poll at stop failed (TimedOut); updates may come again"),
        ("ERROR", "something else entirely"),
    ]
    assert_concise(lines[:1])


async def test_typing_skips_a_beat_while_the_overall_pace_is_full_and_comes_back(
    tg: FakeTelegram, channel: TelegramChannel
) -> None:
    other = ChatRef("telegram", str(BOT_ID), "dm", "7")
    for i in range(30):  # every slot of Telegram's 30 calls a second is taken
        await channel.send(Outbound(other, f"busy {i}"))
    async with channel.typing(CHAT):
        await channel.send(Outbound(CHAT, "the answer"))  # waits for a free slot
        await tg.wait_for("sendChatAction")  # typing is still shown, once there is room
    typing = tg.calls("sendChatAction")
    answer = next(c for c in tg.calls("sendMessage") if c.params.get("chat_id") == 42)
    assert typing and all(c.at >= answer.at for c in typing)  # it never took the reply's slot


async def test_the_pace_is_saturated_while_every_slot_of_the_second_is_taken() -> None:
    control = FloodControl()

    async def accepted() -> bool:
        return True

    assert not control.saturated()
    for _ in range(29):
        await control.process_request(accepted, (), {}, "sendMessage", {"chat_id": 1}, None)
    assert not control.saturated()  # one slot left: a typing action may take it
    await control.process_request(accepted, (), {}, "sendMessage", {"chat_id": 1}, None)
    assert control.saturated()
    await eventually(lambda: not control.saturated(), 5)  # free again a second later


async def test_without_an_overall_pace_nothing_is_kept_per_call() -> None:
    """`per_second=0` (the benchmarks' fake Bot API has no limit) paces nothing and keeps no
    slot per call: a huge pace instead kept one for every call, growing for as long as the
    daemon ran."""
    control = FloodControl(per_second=0)

    async def accepted() -> bool:
        return True

    for _ in range(100):
        await control.process_request(accepted, (), {}, "sendMessage", {"chat_id": 1}, None)
    assert not control.saturated()
    assert len(control._recent) == 0
