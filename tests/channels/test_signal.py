"""The Signal adapter end to end: the real aiohttp client against a fake signal-cli-rest-api."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels.base import Channel, ChatRef, FinalOnlyStream, Image, Inbound, Outbound
from channels.signal.adapter import (
    SignalApiError,
    SignalChannel,
    SignalOptions,
    format_message_id,
    group_id_from_internal,
    parse_message_id,
    strip_bot_mentions,
    to_styled_mode,
)
from channels.signal.render import render_signal_text
from tests.fakes.signal import FakeSignal

pytestmark = pytest.mark.timeout(20)

ALICE = "+15550001111"
BOB = "+15550002222"
GROUP_INTERNAL = "Z3JvdXAtaW50ZXJuYWwtaWQtMDAwMQ=="
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def options_for(url: str, number: str, **overrides: object) -> SignalOptions:
    settings: dict[str, object] = {
        "typing_interval": 0.05,
        "reconnect_initial": 0.05,
        "reconnect_max": 0.2,
        "retry_initial": 0.01,
    }
    settings.update(overrides)
    return SignalOptions(number=number, service_url=url, **settings)  # type: ignore[arg-type]


class Harness:
    """A started channel plus what it delivered to the gateway."""

    def __init__(self, fake: FakeSignal, **overrides: object) -> None:
        self.fake = fake
        self.channel = SignalChannel(options_for(fake.url, fake.number, **overrides))
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue()

    async def start(self) -> None:
        await self.channel.start(self.inbox.put)
        await self.fake.wait_connected()

    async def next(self, within: float = 5.0) -> Inbound:
        return await asyncio.wait_for(self.inbox.get(), within)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSignal]:
    async with FakeSignal() as server:
        yield server


@pytest.fixture
async def bot(fake: FakeSignal) -> AsyncIterator[Harness]:
    harness = Harness(fake)
    await harness.start()
    yield harness
    await harness.channel.stop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def go_styled_parse(message: str) -> tuple[str, list[str]]:
    """signal-cli-rest-api's styled-mode parser (utils/textstyleparser.go), ported as the
    oracle for what the server makes of our messages."""
    none, italic_begin, italic_end, bold_begin, bold_end1, bold_end2 = range(6)
    mono_begin, mono_end, strike_begin, strike_end = range(6, 10)
    state, style, begin, length, controls, last = none, "", 0, 0, 0, ""
    text: list[str] = []
    styles: list[str] = []
    for index, char in enumerate(message):
        if char == "*":
            if state == italic_begin:
                if last == "*":
                    state, style, begin, length = bold_begin, "BOLD", index - controls, 0
                else:
                    state = italic_end
            elif state == none:
                state, style, begin, length = italic_begin, "ITALIC", index - controls, 0
            elif state == bold_begin:
                state = bold_end1
            elif state == bold_end1:
                state = bold_end2
            controls += 1
        elif char == "`":
            if state == none:
                state, style, begin, length = mono_begin, "MONOSPACE", index - controls, 0
            elif state == mono_begin:
                state = mono_end
            controls += 1
        elif char == "~":
            if state == none:
                state, style, begin, length = strike_begin, "STRIKETHROUGH", index - controls, 0
            elif state == strike_begin:
                state = strike_end
            controls += 1
        else:
            length += 1
            text.append(char)
        last = char
        if state in (italic_end, bold_end2, mono_end, strike_end):
            styles.append(f"{begin}:{length}:{style}")
            state, style, begin, length = none, "", 0, 0
    return "".join(text), styles


# --- receiving ---------------------------------------------------------------------------------


async def test_channel_satisfies_the_channel_protocol(fake: FakeSignal) -> None:
    channel = SignalChannel(options_for(fake.url, fake.number))
    assert isinstance(channel, Channel)
    assert channel.name == "signal"
    assert channel.account == fake.number


async def test_dm_becomes_inbound_and_the_reply_goes_back_to_the_sender(bot: Harness) -> None:
    stamp = await bot.fake.dm(ALICE, "hello there", name="Alice")
    message = await bot.next()
    message_id = f"{ALICE}:{stamp}"
    assert message.chat == ChatRef("signal", bot.fake.number, "dm", ALICE, None, message_id)
    assert (message.sender_id, message.sender_name, message.text) == (ALICE, "Alice", "hello there")
    assert message.message_id == message_id
    assert not message.mentioned
    assert bot.channel.status().up

    await bot.channel.send(Outbound(message.chat, "Hi Alice"))
    [sent] = bot.fake.sent
    assert sent["recipients"] == [ALICE]
    assert sent["number"] == bot.fake.number
    assert sent["message"] == "Hi Alice"
    assert "quote_timestamp" not in sent


async def test_dm_from_a_sender_without_number_is_keyed_by_uuid(bot: Harness) -> None:
    uuid = "cccccccc-1111-4111-8111-000000000003"
    await bot.fake.dm(None, "hi", sender_uuid=uuid)
    message = await bot.next()
    assert (message.chat.chat_id, message.sender_id) == (uuid, uuid)


async def test_group_mention_is_stripped_and_the_reply_quotes_it_in_the_group(
    bot: Harness,
) -> None:
    group_id = bot.fake.add_group(GROUP_INTERNAL, "Team")
    stamp = await bot.fake.group_message(
        ALICE, GROUP_INTERNAL, "\ufffc what's the weather?", mentions=[bot.fake.mention_of_bot(0)]
    )
    message = await bot.next()
    assert message.chat.kind == "group"
    assert message.chat.chat_id == group_id
    assert message.mentioned
    assert message.text == "what's the weather?"

    await bot.channel.send(Outbound(message.chat, "Sunny."))
    [sent] = bot.fake.sent
    assert sent["recipients"] == [group_id]
    assert (sent["quote_author"], sent["quote_timestamp"]) == (ALICE, stamp)


async def test_group_id_is_derived_when_the_group_list_does_not_know_it(bot: Harness) -> None:
    await bot.fake.group_message(ALICE, GROUP_INTERNAL, "anyone?")
    message = await bot.next()
    assert message.chat.chat_id == group_id_from_internal(GROUP_INTERNAL)
    assert message.chat.chat_id == bot.fake.add_group(GROUP_INTERNAL)


async def test_unmentioned_group_message_arrives_unmentioned_with_others_named(
    bot: Harness,
) -> None:
    bob = {"name": "Bob", "number": BOB, "uuid": "u-bob", "start": 4, "length": 1}
    await bot.fake.group_message(ALICE, GROUP_INTERNAL, "ask \ufffc about it", mentions=[bob])
    message = await bot.next()
    assert message.chat.kind == "group"
    assert not message.mentioned
    assert message.text == "ask @Bob about it"


async def test_mention_by_uuid_counts_once_the_bot_knows_its_uuid(bot: Harness) -> None:
    own_sync = bot.fake.envelope(
        bot.fake.number,
        sender_uuid=bot.fake.uuid,
        syncMessage={"sentMessage": {"message": "from my phone", "timestamp": 1}},
    )
    await bot.fake.push_envelope(own_sync)
    mention = {"name": "Perch", "number": None, "uuid": bot.fake.uuid, "start": 0, "length": 1}
    await bot.fake.group_message(ALICE, GROUP_INTERNAL, "\ufffc, ping", mentions=[mention])
    message = await bot.next()
    assert message.mentioned
    assert message.text == "ping"


async def test_reply_to_a_bot_message_counts_as_mention(bot: Harness) -> None:
    quote = {
        "id": 1234,
        "author": bot.fake.number,
        "authorNumber": bot.fake.number,
        "authorUuid": bot.fake.uuid,
        "text": "earlier answer",
    }
    await bot.fake.group_message(ALICE, GROUP_INTERNAL, "why?", quote=quote)
    message = await bot.next()
    assert message.mentioned
    assert message.text == "why?"


async def test_quote_of_a_message_the_bot_sent_counts_as_mention(bot: Harness) -> None:
    bot.fake.send_response_as_list = True  # some server versions answer a list
    group = ChatRef("signal", bot.fake.number, "group", bot.fake.add_group(GROUP_INTERNAL))
    await bot.channel.send(Outbound(group, "I said this"))
    sent_at = bot.fake.sent[-1]["_timestamp"]
    quote = {"id": sent_at, "author": "u-unknown", "authorNumber": None, "authorUuid": "u-unknown"}
    await bot.fake.group_message(ALICE, GROUP_INTERNAL, "and that?", quote=quote)
    assert (await bot.next()).mentioned


async def test_own_messages_edits_receipts_typing_and_reactions_are_ignored(
    bot: Harness,
) -> None:
    fake = bot.fake
    await fake.push_envelope(fake.envelope(fake.number, {"message": "echo of myself"}))
    await fake.push_envelope(
        fake.envelope(fake.number, syncMessage={"sentMessage": {"message": "x", "timestamp": 2}})
    )
    receipt = {"isDelivery": True, "isRead": False, "isViewed": False, "timestamps": [1], "when": 3}
    await fake.push_envelope(fake.envelope(ALICE, receiptMessage=receipt))
    await fake.push_envelope(
        fake.envelope(ALICE, typingMessage={"action": "STARTED", "timestamp": 4})
    )
    edit = {"targetSentTimestamp": 5, "dataMessage": {"timestamp": 6, "message": "edited"}}
    await fake.push_envelope(fake.envelope(ALICE, editMessage=edit))
    reaction = {
        "emoji": "👍",
        "isRemove": False,
        "targetAuthor": fake.number,
        "targetSentTimestamp": 7,
    }
    await fake.dm(ALICE, None, reaction=reaction)
    await fake.push_raw('{"error": "signal-cli hiccup"}')
    await fake.dm(ALICE, "the real one")
    message = await bot.next()
    assert message.text == "the real one"
    assert bot.inbox.empty()


async def test_command_with_bot_suffix_or_mention_is_normalised(bot: Harness) -> None:
    await bot.fake.dm(ALICE, "/stop@perch")
    assert (await bot.next()).text == "/stop"
    await bot.fake.group_message(
        ALICE, GROUP_INTERNAL, "\ufffc /stopall", mentions=[bot.fake.mention_of_bot(0)]
    )
    message = await bot.next()
    assert (message.text, message.mentioned) == ("/stopall", True)


# --- images ------------------------------------------------------------------------------------


async def test_image_reaches_inbound_images(bot: Harness) -> None:
    attachment = bot.fake.add_attachment("img-1.png", PNG, "image/png")
    await bot.fake.dm(ALICE, "look", attachments=[attachment])
    message = await bot.next()
    assert message.images == (Image("image/png", PNG),)
    assert message.text == "look"


async def test_image_without_caption_still_arrives(bot: Harness) -> None:
    attachment = bot.fake.add_attachment("img-2.jpg", PNG, "image/jpeg")
    await bot.fake.dm(ALICE, None, attachments=[attachment])
    message = await bot.next()
    assert message.images == (Image("image/jpeg", PNG),)
    assert message.text == ""


async def test_oversized_images_are_dropped_with_a_note(fake: FakeSignal) -> None:
    harness = Harness(fake, max_image_bytes=1_000_000)
    await harness.start()
    try:
        big = b"\xff" * 2_500_000
        declared = fake.add_attachment("big-1.png", big, "image/png")
        undeclared = fake.add_attachment("big-2.png", big, "image/png", size=False)
        document = fake.add_attachment("doc.pdf", b"%PDF", "application/pdf")
        await fake.dm(ALICE, "three files", attachments=[declared, undeclared, document])
        message = await harness.next()
        assert message.images == ()
        assert message.text.splitlines() == [
            "three files",
            "[image too large: 2.5 MB, limit 1 MB]",
            "[image too large: over 1 MB, limit 1 MB]",
        ]
        (pdf,) = message.attachments  # documents travel on as attachments (bot/ reads them)
        assert (pdf.kind, pdf.name, pdf.media_type, pdf.data) == (
            "file",
            "doc.pdf.bin",
            "application/pdf",
            b"%PDF",
        )
        assert not fake.requests_to("GET", "/v1/attachments/big-1.png")
    finally:
        await harness.channel.stop()


# --- sending -----------------------------------------------------------------------------------


async def test_long_reply_is_sent_in_order_in_chunks_within_the_limit(fake: FakeSignal) -> None:
    harness = Harness(fake, chunk_limit=200)
    await harness.start()
    try:
        paragraphs = [f"Paragraph number {i} says something fairly ordinary." for i in range(12)]
        chat = ChatRef("signal", fake.number, "dm", ALICE)
        await harness.channel.send(Outbound(chat, "\n\n".join(paragraphs)))
        messages = [body["message"] for body in fake.sent]
        assert len(messages) > 1
        assert all(len(message) <= 200 for message in messages)
        joined = "\n".join(messages)
        positions = [joined.index(paragraph) for paragraph in paragraphs]
        assert positions == sorted(positions)
    finally:
        await harness.channel.stop()


async def test_only_the_first_chunk_quotes_the_message(fake: FakeSignal) -> None:
    harness = Harness(fake, chunk_limit=100)
    await harness.start()
    try:
        group = ChatRef("signal", fake.number, "group", "group.abc", None, f"{ALICE}:777")
        await harness.channel.send(Outbound(group, "\n\n".join(["word " * 15] * 3)))
        assert len(fake.sent) >= 2
        assert fake.sent[0]["quote_timestamp"] == 777
        assert all("quote_timestamp" not in body for body in fake.sent[1:])
    finally:
        await harness.channel.stop()


async def test_markdown_styles_are_sent_in_styled_mode(bot: Harness) -> None:
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    await bot.channel.send(Outbound(chat, "**Bold** and plain"))
    [sent] = bot.fake.sent
    plain, styles = render_signal_text("**Bold** and plain")
    assert sent["text_mode"] == "styled"
    assert go_styled_parse(sent["message"]) == (plain, sorted(styles))
    assert "0:4:BOLD" in styles


async def test_text_with_styling_characters_is_sent_unstyled_and_intact(bot: Harness) -> None:
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    await bot.channel.send(Outbound(chat, "**Note**: compute `a*b` with ~2 tries"))
    [sent] = bot.fake.sent
    plain, _ = render_signal_text("**Note**: compute `a*b` with ~2 tries")
    assert sent["text_mode"] == "normal"
    assert sent["message"] == plain
    assert "a*b" in sent["message"]


async def test_rejected_styled_message_falls_back_to_plain_text(bot: Harness) -> None:
    bot.fake.fail_next("/v2/send", 400, body={"error": "Failed to parse text style"})
    group = ChatRef("signal", bot.fake.number, "group", "group.abc", None, f"{ALICE}:42")
    await bot.channel.send(Outbound(group, "**hi** there"))
    attempts = bot.fake.requests_to("POST", "/v2/send")
    assert [attempt.status for attempt in attempts] == [400, 201]
    assert attempts[0].body["text_mode"] == "styled"
    [sent] = bot.fake.sent
    assert (sent["text_mode"], sent["message"]) == ("normal", "hi there")
    assert "quote_timestamp" not in sent


async def test_rate_limit_is_waited_out_and_delivered_once(bot: Harness) -> None:
    bot.fake.fail_next("/v2/send", 429, headers={"Retry-After": "0.3"})
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    started = time.monotonic()
    await bot.channel.send(Outbound(chat, "eventually"))
    assert time.monotonic() - started >= 0.3
    assert [r.status for r in bot.fake.requests_to("POST", "/v2/send")] == [429, 201]
    assert [body["message"] for body in bot.fake.sent] == ["eventually"]


async def test_server_errors_are_retried_until_delivered(bot: Harness) -> None:
    bot.fake.fail_next("/v2/send", 503, times=2)
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    await bot.channel.send(Outbound(chat, "persistent"))
    assert [r.status for r in bot.fake.requests_to("POST", "/v2/send")] == [503, 503, 201]
    assert len(bot.fake.sent) == 1


async def test_send_gives_up_after_bounded_attempts_with_an_actionable_error(
    fake: FakeSignal,
) -> None:
    harness = Harness(fake, send_attempts=3)
    await harness.start()
    try:
        fake.fail_next("/v2/send", 502, times=10)
        chat = ChatRef("signal", fake.number, "dm", ALICE)
        with pytest.raises(SignalApiError, match=r"after 3 attempts .*HTTP 502.*is up"):
            await harness.channel.send(Outbound(chat, "doomed"))
        assert len(fake.requests_to("POST", "/v2/send")) == 3
    finally:
        await harness.channel.stop()


async def test_refused_plain_message_is_not_retried(bot: Harness) -> None:
    bot.fake.fail_next("/v2/send", 400, body={"error": "Unregistered user"})
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    with pytest.raises(SignalApiError, match="Unregistered user"):
        await bot.channel.send(Outbound(chat, "hello"))
    assert len(bot.fake.requests_to("POST", "/v2/send")) == 1


async def test_slow_chat_does_not_block_other_chats_and_keeps_its_own_order(
    bot: Harness,
) -> None:
    release = bot.fake.hold_sends_to(ALICE)
    alice = ChatRef("signal", bot.fake.number, "dm", ALICE)
    bob = ChatRef("signal", bot.fake.number, "dm", BOB)
    first = asyncio.create_task(bot.channel.send(Outbound(alice, "first")))
    await bot.fake.wait_for(lambda: len(bot.fake.requests_to("POST", "/v2/send")) == 1)
    second = asyncio.create_task(bot.channel.send(Outbound(alice, "second")))
    await asyncio.wait_for(bot.channel.send(Outbound(bob, "not blocked")), 2)
    assert [body["message"] for body in bot.fake.sent] == ["not blocked"]
    to_alice = [
        r for r in bot.fake.requests_to("POST", "/v2/send") if r.body["recipients"] == [ALICE]
    ]
    assert len(to_alice) == 1  # "second" waits for "first"
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second), 2)
    assert [body["message"] for body in bot.fake.sent] == ["not blocked", "first", "second"]


async def test_reply_stream_sends_only_the_final_text(bot: Harness) -> None:
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    stream = bot.channel.reply_stream(chat)
    assert isinstance(stream, FinalOnlyStream)
    await stream.update("partial")
    await stream.finish("Done.")
    assert [body["message"] for body in bot.fake.sent] == ["Done."]


async def test_typing_indicator_is_refreshed_and_stopped_even_on_error(bot: Harness) -> None:
    group = ChatRef("signal", bot.fake.number, "group", "group.abc")
    puts = lambda: bot.fake.requests_to("PUT", "/v1/typing-indicator/")  # noqa: E731
    with pytest.raises(RuntimeError):
        async with bot.channel.typing(group):
            await bot.fake.wait_for(lambda: len(puts()) >= 2)
            raise RuntimeError("turn failed")
    deletes = bot.fake.requests_to("DELETE", "/v1/typing-indicator/")
    assert [r.body for r in deletes] == [{"recipient": "group.abc"}]
    assert all(r.body == {"recipient": "group.abc"} for r in puts())
    assert bot.fake.requests[-1].method == "DELETE"


async def test_react_posts_a_reaction_and_remove_deletes_it(bot: Harness) -> None:
    chat = ChatRef("signal", bot.fake.number, "dm", ALICE)
    await bot.channel.react(chat, f"{ALICE}:1234", ALICE, "👍")
    [request] = bot.fake.requests_to("POST", f"/v1/reactions/{bot.fake.number}")
    assert request.body == {
        "recipient": ALICE,
        "reaction": "👍",
        "target_author": ALICE,
        "timestamp": 1234,
    }
    await bot.channel.react(chat, f"{ALICE}:1234", ALICE, "👍", remove=True)
    [removed] = bot.fake.requests_to("DELETE", f"/v1/reactions/{bot.fake.number}")
    assert removed.body == request.body


async def test_read_receipts_are_sent_when_enabled(fake: FakeSignal) -> None:
    harness = Harness(fake, send_read_receipts=True)
    await harness.start()
    try:
        stamp = await fake.dm(ALICE, "read me")
        await harness.next()
        [receipt] = fake.requests_to("POST", "/v1/receipts/")
        assert receipt.body == {"receipt_type": "read", "recipient": ALICE, "timestamp": stamp}
    finally:
        await harness.channel.stop()


# --- connection lifecycle ----------------------------------------------------------------------


@pytest.mark.parametrize("abort", [False, True], ids=["clean-close-1000", "dropped"])
async def test_receive_socket_reconnects_and_the_next_message_arrives(
    bot: Harness, abort: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.signal")
    await bot.fake.close_socket(1000, abort=abort)
    await bot.fake.wait_connected(2)
    await bot.fake.dm(ALICE, "still there?")
    assert (await bot.next()).text == "still there?"
    assert bot.channel.status().up  # set before the new socket is read
    downs = [
        r for r in caplog.records if "signal channel down: receive websocket" in r.getMessage()
    ]
    assert [r.levelno for r in downs] == [logging.WARNING]
    ups = [r for r in caplog.records if "signal channel up" in r.getMessage()]
    assert [r.levelno for r in ups] == [logging.INFO]


async def test_status_is_down_while_unreachable_at_start_and_up_once_it_appears() -> None:
    port = free_port()
    fake = FakeSignal()
    channel = SignalChannel(options_for(f"http://127.0.0.1:{port}", fake.number))
    inbox: asyncio.Queue[Inbound] = asyncio.Queue()
    started = time.monotonic()
    await channel.start(inbox.put)
    try:
        assert time.monotonic() - started < 3
        status = channel.status()
        assert not status.up
        assert f"cannot reach signal-cli-rest-api at http://127.0.0.1:{port}" in status.detail
        await fake.start(port)
        await fake.dm(ALICE, "you're back")
        assert (await asyncio.wait_for(inbox.get(), 5)).text == "you're back"
        assert channel.status().up
    finally:
        await channel.stop()
        await fake.stop()


async def test_wrong_mode_marks_status_down_with_instructions_then_recovers(
    fake: FakeSignal,
) -> None:
    fake.set_mode("normal")
    harness = Harness(fake)
    await harness.channel.start(harness.inbox.put)
    try:
        status = harness.channel.status()
        assert not status.up
        assert "MODE=json-rpc" in status.detail
        assert fake.ws_connections == 0
        fake.set_mode("json-rpc")
        await fake.dm(ALICE, "hello again")
        assert (await harness.next()).text == "hello again"
        assert harness.channel.status().up
    finally:
        await harness.channel.stop()


async def test_stop_is_prompt_and_leaves_no_tasks(bot: Harness) -> None:
    started = time.monotonic()
    await bot.channel.stop()
    assert time.monotonic() - started < 1.5
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("signal-")]
    status = bot.channel.status()
    assert (status.up, status.detail) == (False, "stopped")


async def test_credentials_in_service_url_never_reach_logs_or_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://perch:s3cret-pass@127.0.0.1:{free_port()}"
    channel = SignalChannel(options_for(url, "+15550000001"))
    await channel.start(asyncio.Queue[Inbound]().put)
    try:
        assert not channel.status().up
        assert "s3cret" not in channel.status().detail
        assert "s3cret" not in caplog.text
    finally:
        await channel.stop()


async def test_credentials_in_service_url_are_sent_as_basic_auth(fake: FakeSignal) -> None:
    url = f"http://perch:s3cret-pass@127.0.0.1:{fake.port}"
    channel = SignalChannel(options_for(url, fake.number))
    await channel.start(asyncio.Queue[Inbound]().put)
    try:
        await fake.wait_connected()
        assert fake.requests
        assert {r.authorization for r in fake.requests} == {"Basic cGVyY2g6czNjcmV0LXBhc3M="}
    finally:
        await channel.stop()


async def test_send_before_start_says_what_to_do() -> None:
    channel = SignalChannel(SignalOptions(number="+15550000001"))
    chat = ChatRef("signal", "+15550000001", "dm", ALICE)
    with pytest.raises(SignalApiError, match=r"not started \(call start\(\) first\)"):
        await channel.send(Outbound(chat, "hi"))


def test_empty_number_is_refused_with_the_config_key() -> None:
    with pytest.raises(ValueError, match=r"channels\.signal\.number"):
        SignalChannel(SignalOptions(number=""))


# --- pure pieces, property-tested ----------------------------------------------------------------

_PLAIN_CHARS = st.sampled_from([*"abc XYZ,.!?\n", "é", "漢", "😀"])
_ANY_CHARS = st.one_of(_PLAIN_CHARS, st.sampled_from(list("*`~|\\")))
_STYLES = ["BOLD", "ITALIC", "MONOSPACE", "STRIKETHROUGH"]


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@given(
    st.text(_ANY_CHARS, max_size=40),
    st.lists(
        st.tuples(
            st.integers(0, 45), st.integers(0, 10), st.sampled_from([*_STYLES, "SPOILER", "bogus"])
        ),
        max_size=5,
    ),
)
def test_styled_mode_never_changes_the_text_the_server_shows(
    text: str, ranges: list[tuple[int, int, str]]
) -> None:
    styles = [f"{start}:{length}:{style}" for start, length, style in ranges]
    message, mode = to_styled_mode(text, styles)
    if mode == "normal":
        assert message == text
    else:
        assert mode == "styled"
        assert go_styled_parse(message)[0] == text


@st.composite
def _styled_bmp_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    """BMP text without control characters and non-overlapping, non-touching style ranges."""
    pieces = draw(
        st.lists(
            st.text(st.sampled_from(list("abc XYZ,é漢")), min_size=1, max_size=6),
            min_size=1,
            max_size=8,
        )
    )
    text = ""
    styles: list[str] = []
    for index, piece in enumerate(pieces):
        if index % 2 == 1 and draw(st.booleans()):
            styles.append(f"{len(text)}:{len(piece)}:{draw(st.sampled_from(_STYLES))}")
        text += piece
    return text, styles


@given(_styled_bmp_text())
def test_styled_mode_carries_every_separate_style_to_the_server(
    case: tuple[str, list[str]],
) -> None:
    text, styles = case
    message, mode = to_styled_mode(text, styles)
    assert mode == ("styled" if styles else "normal")
    assert go_styled_parse(message) == (text, styles)


_MARKDOWN_BITS = st.sampled_from(
    [
        *("ab", " ", "漢字", "\n", "\n\n", "# ", "> ", "- ", "1. ", "*", "_", "~", "`"),
        *("**bo ld**", "*it*", "_it_", "~~gone~~", "`co de`", "***both***", "**a *b* c**"),
        *("[link](http://x.y)", "```\nx\n```"),
    ]
)


@given(st.lists(_MARKDOWN_BITS, max_size=40).map("".join))
def test_rendered_markdown_reaches_the_server_with_its_text_and_only_its_styles(md: str) -> None:
    plain, styles = render_signal_text(md)
    message, mode = to_styled_mode(plain, styles)
    if mode == "normal":
        assert message == plain
    else:
        shown, shown_styles = go_styled_parse(message)
        assert shown == plain
        # Every styled character the server shows was styled so by the renderer (touching
        # ranges of one style may arrive merged). BMP text: code points == UTF-16 units.
        assert _styled_chars(shown_styles) <= _styled_chars(styles)


def _styled_chars(styles: list[str]) -> set[tuple[int, str]]:
    chars: set[tuple[int, str]] = set()
    for entry in styles:
        start, length, style = entry.split(":")
        chars.update((i, style) for i in range(int(start), int(start) + int(length)))
    return chars


def test_touching_italics_are_merged_so_the_server_does_not_read_bold() -> None:
    message, mode = to_styled_mode("abcd", ["0:2:ITALIC", "2:2:ITALIC"])
    assert (message, mode) == ("*abcd*", "styled")
    assert go_styled_parse(message) == ("abcd", ["0:4:ITALIC"])


def test_style_offsets_are_utf16_units() -> None:
    message, _ = to_styled_mode("😀 hi", ["3:2:BOLD"])
    assert message == "😀 **hi**"


_MENTION_TEXT = st.text(st.sampled_from([*"ab ,:\n", "😀"]), max_size=8)


@given(st.lists(st.tuples(_MENTION_TEXT, st.booleans()), min_size=1, max_size=4), _MENTION_TEXT)
def test_bot_mentions_are_removed_and_others_named(
    parts: list[tuple[str, bool]], tail: str
) -> None:
    text = ""
    mentions: list[dict[str, object]] = []
    for before, is_bot in parts:
        text += before
        who = {"number": "+1000", "name": "+1000"} if is_bot else {"number": "+2000", "name": "Bob"}
        mentions.append({**who, "start": _utf16_len(text), "length": 1})
        text += "\ufffc"
    text += tail
    result, mentioned = strip_bot_mentions(text, mentions, lambda m: m.get("number") == "+1000")
    assert mentioned == any(is_bot for _, is_bot in parts)
    assert "\ufffc" not in result
    assert "\x00" not in result
    assert result.count("@Bob") == sum(1 for _, is_bot in parts if not is_bot)
    if mentioned:
        assert result == result.strip()


def test_mention_ranges_out_of_bounds_are_ignored() -> None:
    mentions = [{"number": "+1000", "start": 99, "length": 1}, {"number": "+1000", "start": 0}]
    assert strip_bot_mentions("hi \ufffc", mentions, lambda m: True) == ("hi \ufffc", False)


@given(
    st.one_of(st.from_regex(r"\+[1-9][0-9]{6,14}", fullmatch=True), st.uuids().map(str)),
    st.integers(min_value=0, max_value=2**63),
)
def test_message_ids_round_trip(author: str, timestamp: int) -> None:
    assert parse_message_id(format_message_id(author, timestamp)) == (author, timestamp)


@pytest.mark.parametrize("bad", [None, "", "12345", "+1555:", ":123", "+1555:12a"])
def test_malformed_message_ids_are_not_parsed(bad: str | None) -> None:
    assert parse_message_id(bad) is None
