"""The one delivery path: finals, previews, cron, heartbeat and the `message` tool show the
same cleaned text; previews hold back what may still turn into debris or a silent token, and
`/stop` leaves no raw text in the chat. Pure cases, the daemon with an in-process channel,
and real python-telegram-bot / slack_sdk clients against the wire fakes."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agents.tools.cron import CronRequest
from bot.daemon import Daemon
from bot.kernel.delivery import MAX_REPLY_CHARS, Preview, clean_reply, cut_long_reply, preview_text
from bot.kernel.routing import encode_chat
from channels.telegram.render import render_telegram_html
from markup.fences import fenced_blocks
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config, running_daemon
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

OWNER = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["u1", "*"]}
RAW = "<think>\nthe secret plan\n</think>\nHello there. NO_REPLY"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def settle(daemon: Daemon) -> None:
    assert daemon.gateway is not None
    await asyncio.wait_for(daemon.gateway.wait_idle(), 30)  # generous: a loaded CI machine


# -- the pure part: what a preview may show --------------------------------------------------


@pytest.mark.parametrize(
    ("partial", "shown"),
    [
        ("<think>secret</think>Hello", "Hello"),
        ("<think>secr", ""),
        ("<think>secret</thi", ""),
        ("Hello\n<thi", "Hello"),
        ("Sure <think>", "Sure"),
        ("Sure <tool_ca", "Sure"),
        ("Hello\n[Tool call: web_fe", "Hello"),
        ('Hello\n<tool_call>\n{"q": ', "Hello"),
        ("NO_RE", ""),
        ("**NO_REPLY", ""),
        ("NO_REPLY: done", "done"),
        ("HEARTBEAT_", ""),
        ("Done. NO_RE", "Done."),
        ("Done. NO_REPLY", "Done."),
        ("x < 3 and y", "x < 3 and y"),
        ("See [the docs](https://example.com) now", "See [the docs](https://example.com) now"),
    ],
)
def test_a_preview_holds_back_what_may_still_become_debris_or_a_silent_token(
    partial: str, shown: str
) -> None:
    assert preview_text(partial) == shown


_PROSE = st.sampled_from(["Hello", " world", ".", "\n", "\n\n", "Ok ", "`code` ", "a < b "])
_DEBRIS = st.sampled_from(
    [
        "\n<think>\nSECRET\n</think>\n",
        "\n<thinking>SECRET</thinking>",
        '\n<tool_call>{"SECRET": 1}</tool_call>\n',
        "\n[Tool call: SECRET]\n",
        "\nNO_REPLY",
    ]
)


@settings(max_examples=150)
@given(st.lists(st.one_of(_PROSE, _DEBRIS), max_size=8))
def test_no_prefix_of_a_reply_previews_what_its_final_hides(parts: list[str]) -> None:
    text = "".join(parts)
    assert "SECRET" not in clean_reply(text)
    assert all("SECRET" not in preview_text(text[:end]) for end in range(len(text) + 1))


@settings(max_examples=100)
@given(st.lists(_PROSE, max_size=6), st.sampled_from([" ", "\n\n", ". "]))
def test_a_trailing_no_reply_is_never_previewed_while_it_is_written(
    parts: list[str], separator: str
) -> None:
    text = "".join(parts) + separator + "NO_REPLY"
    assert "NO_R" not in clean_reply(text)
    assert all("NO_R" not in preview_text(text[:end]) for end in range(len(text) + 1))


@pytest.mark.parametrize("token", ["NO_REPLY", "*NO_REPLY*", "  NO_REPLY  "])
def test_a_silent_reply_never_shows_a_partial_token(token: str) -> None:
    assert clean_reply(token) == ""
    assert all(preview_text(token[:end]) == "" for end in range(len(token) + 1))


class _Recorder:
    """A `ReplyStream` that records what it was asked to show."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.updates: list[str] = []

    async def update(self, text: str) -> None:
        self.updates.append(text)

    async def finish(self, text: str) -> None:
        self.updates.append(f"final: {text}")

    async def abort(self) -> None:
        return None


async def test_previews_are_cleaned_once_per_edit_interval_not_per_delta() -> None:
    now = [0.0]
    stream = _Recorder(interval=1.0)
    preview = Preview(stream, clock=lambda: now[0])
    await preview.feed("Hello")
    for i in range(500):  # a fast model: 500 deltas within one interval
        await preview.feed(f" w{i}")
    assert stream.updates == ["Hello"]
    now[0] = 1.5
    await preview.feed(" end")
    assert len(stream.updates) == 2 and stream.updates[-1].endswith("w499 end")
    await preview.call_ended("Hello, all of it")
    assert stream.updates[-1] == "Hello, all of it"
    preview.close()


async def test_a_stream_without_previews_gets_no_cleaning_work() -> None:
    stream = _Recorder(interval=math.inf)
    preview = Preview(stream)
    await preview.feed("<think>x</think>Hello")
    await preview.call_ended("<think>x</think>Hello")
    assert stream.updates == [] and not preview.enabled


# -- through the daemon ----------------------------------------------------------------------


async def test_a_streamed_reply_previews_only_cleaned_text(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.text("<think>the secret plan</think>Hello, Ada. NO_REPLY", chunk=2))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("hi")
        await settle(daemon)
    assert chan.texts() == ["Hello, Ada."]
    assert chan.previews and chan.previews[-1] == "Hello, Ada."
    for preview in chan.previews:
        assert "secret" not in preview and "<" not in preview and "NO_" not in preview
        assert "Hello, Ada.".startswith(preview)


async def test_a_silent_reply_shows_no_preview_at_all(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.queue(Reply.text("NO_REPLY", chunk=1))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("ok thanks")
        await settle(daemon)
    assert chan.previews == [] and chan.sent == []


async def test_stop_leaves_the_cleaned_partial_text_not_the_raw_one(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.stall("<think>\nthe secret plan\n</think>\nLet me see. NO_RE", chunk=3))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("hi")
        await fake.wait_requests(1, timeout=30)
        await eventually(lambda: "Let me see." in chan.previews, timeout=30)
        await chan.say("/stop")
        await settle(daemon)
    assert sorted(chan.texts()) == ["Let me see.", "Stopped."]
    assert chan.previews and all("Let me see.".startswith(p) for p in chan.previews)


async def test_stop_before_anything_was_previewed_sends_nothing_more(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.stall("<think>\nthe secret plan", chunk=3))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("hi")
        await fake.wait_requests(1, timeout=30)
        await chan.say("/stop")
        await settle(daemon)
    assert chan.texts() == ["Stopped."] and chan.previews == []


async def _deliver_by_cron(daemon: Daemon, chan: MemoryChannel) -> None:
    assert daemon.scheduler is not None
    request = CronRequest(
        kind="at", expr="+0.1s", message="Say hello.", deliver_to=encode_chat(chan.chat("u1"))
    )
    assert daemon.cron is not None
    await daemon.cron.add_job(request)


async def _deliver_by_heartbeat(daemon: Daemon, chan: MemoryChannel) -> None:
    assert daemon.scheduler is not None and daemon.scheduler.heartbeat is not None
    (daemon.config.workspace / "HEARTBEAT.md").write_text("- check the mail\n")
    assert await daemon.scheduler.heartbeat.tick() == "delivered"


async def _deliver_by_turn(daemon: Daemon, chan: MemoryChannel) -> None:
    await chan.say("hi")


@pytest.mark.parametrize(
    "path", [_deliver_by_turn, _deliver_by_cron, _deliver_by_heartbeat], ids=lambda f: f.__name__
)
async def test_every_kind_of_reply_is_cleaned_the_same_way(
    tmp_path: Path, fake: FakeAnthropic, path: Any
) -> None:
    fake.default = lambda body: Reply.text(RAW)
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await path(daemon, chan)
        assert await chan.wait_sent(1, timeout=30) == ["Hello there."]


async def test_the_message_tool_sends_cleaned_text(tmp_path: Path, fake: FakeAnthropic) -> None:
    fake.queue(Reply.tool_use([("message", {"text": RAW, "to": "owner"})]), Reply.text("NO_REPLY"))
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, fake, {"telegram": chan}, OWNER) as daemon:
        await chan.say("tell me", chat_id="u1")
        await settle(daemon)
    assert chan.texts() == ["Hello there."]


# -- on the wire: python-telegram-bot against the fake Bot API --------------------------------


@contextlib.asynccontextmanager
async def _telegram_daemon(
    tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram
) -> AsyncIterator[Daemon]:
    """A started daemon on the fake Bot API, DMs from user 42 allowed; stopped on exit."""
    overrides = {
        "channels.telegram": {
            "enabled": True,
            "token": TOKEN,
            "base_url": tg.base_url,
            "allow_from": ["42"],
        }
    }
    daemon = Daemon(make_config(tmp_path, model.base_url, overrides))
    await daemon.start()
    try:
        yield daemon
    finally:
        await daemon.stop()


def _wire_texts(tg: FakeTelegram) -> list[str]:
    return tg.texts("sendMessage") + tg.texts("editMessageText")


async def test_telegram_never_sees_the_thinking_in_a_preview_or_the_final(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    reply = "<think>secret</think>Hello, here is a longer answer for the preview. NO_REPLY"
    fake.queue(Reply.text(reply, chunk=2))
    async with FakeTelegram() as tg, _telegram_daemon(tmp_path, fake, tg) as daemon:
        tg.dm("hi", user_id=42)
        await fake.wait_requests(1, timeout=30)
        await settle(daemon)
    final = render_telegram_html("Hello, here is a longer answer for the preview.")
    texts = _wire_texts(tg)
    assert texts[-1] == final or tg.texts()[-1] == final
    assert all("secret" not in t and "think" not in t and "NO_" not in t for t in texts)


@settings(max_examples=60)
@given(
    st.lists(
        st.sampled_from(["word", "x" * 40, "\n", "\n\n", " ", "```", "~~~py", "é"]), max_size=400
    ),
    st.integers(20, 400),
)
@example(["word"] * 8 + ["x" * 40, "\n```\n```\nword"], 81)  # cut just after a closed block
def test_a_long_reply_is_cut_at_a_break_with_a_note(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    cut = cut_long_reply(text, limit)
    if len(text) <= limit:
        assert cut == text
        return
    head, note = cut.rsplit("\n\n[Reply cut: ", 1)
    assert note.endswith(" more characters not sent.]")
    kept = text[: len(text) - int(note.split(" ")[0].replace(",", ""))]  # what the note counts
    assert len(kept) <= limit and head.startswith(kept)  # sent as it was, perhaps a fence closed
    opened = fenced_blocks(kept)
    if opened and not opened[-1].closed:  # closed with the opener's own marker (``` or ~~~)
        assert head == kept + "\n" + opened[-1].fence.indent + opened[-1].fence.marker
    else:
        assert head == kept
    assert all(block.closed for block in fenced_blocks(head))  # no code block left open


async def test_a_model_that_runs_on_sends_a_bounded_reply_to_telegram(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    # A looping model (or a server ignoring max_tokens): 1 MB of distinct paragraphs.
    endless = "".join(f"Paragraph {i}: " + "lorem ipsum dolor " * 5 + "\n\n" for i in range(10_000))
    fake.queue(Reply.text(endless))
    async with FakeTelegram() as tg, _telegram_daemon(tmp_path, fake, tg) as daemon:
        tg.dm("hi", user_id=42)
        await fake.wait_requests(1, timeout=30)
        await settle(daemon)
        texts = tg.texts()
        tg.dm("and then?", user_id=42)  # the history holds what the chat received
        await fake.wait_requests(2, timeout=30)
        await settle(daemon)
    assert len(texts) <= MAX_REPLY_CHARS // 4096 + 2  # about 25 messages, not 270
    assert "Paragraph 0:" in texts[0]
    assert "more characters not sent." in texts[-1]
    answer = fake.requests[1]["messages"][1]["content"][0]["text"]
    assert len(answer) < MAX_REPLY_CHARS + 100 and answer.endswith("more characters not sent.]")


async def test_telegram_preview_after_stop_shows_only_cleaned_text(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.stall("<think>secret</think>Hello wor", chunk=3))
    async with FakeTelegram() as tg, _telegram_daemon(tmp_path, fake, tg) as daemon:
        tg.dm("hi", user_id=42)
        (preview,) = await tg.wait_for("sendMessage", 1, timeout=30)
        tg.dm("/stop", user_id=42)
        await tg.wait_for("sendMessage", 2, timeout=30)
        await settle(daemon)
    assert preview.params["text"] == render_telegram_html("Hello wor")
    assert tg.texts()[1] == "Stopped."
    assert all("secret" not in t and "think" not in t for t in _wire_texts(tg))


# -- on the wire: slack_sdk against the fake Web API ------------------------------------------


async def test_slack_preview_and_stop_show_only_cleaned_text(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.queue(Reply.stall("<think>secret</think>Hello wor", chunk=3))
    sl = FakeSlack()
    await sl.start()
    try:
        overrides = {
            "channels.slack": {
                "enabled": True,
                "bot_token": "xoxb-test",
                "app_token": "xapp-test",
                "base_url": sl.base_url,
                "allow_from": ["UALICE"],
            }
        }
        daemon = Daemon(make_config(tmp_path, fake.base_url, overrides))
        await daemon.start()
        try:
            await sl.wait_connections(1)
            await sl.push_event(_slack_dm(sl, "hi"))
            (preview,) = await sl.wait_for("chat.postMessage", 1, timeout=30)
            await sl.push_event(_slack_dm(sl, "/stop"))
            await sl.wait_for("chat.postMessage", 2, timeout=30)
            await settle(daemon)
        finally:
            await daemon.stop()
    finally:
        await sl.stop()
    assert preview.params["text"] == "Hello wor"
    assert sl.calls_to("chat.postMessage")[1].params["text"] == "Stopped."
    sent = sl.calls_to("chat.postMessage") + sl.calls_to("chat.update")
    assert all("secret" not in str(c.params.get("text")) for c in sent)


def _slack_dm(sl: FakeSlack, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "D100",
        "channel_type": "im",
        "user": "UALICE",
        "text": text,
        "ts": sl.new_ts(),
    }
