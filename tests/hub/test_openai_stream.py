"""What an API stream shows while a run goes: cleaned, only ever extended, calls apart."""

from __future__ import annotations

from agents.loop_events import ModelCallFinished, TextDelta
from bot.web.openai_stream import StreamedText


def drained(streamed: StreamedText) -> str:
    out = ""
    while not streamed.queue.empty():
        out += streamed.queue.get_nowait()
    return out


async def test_text_goes_out_as_written_and_the_rest_at_the_end() -> None:
    streamed = StreamedText()
    for piece in ("Hello ", "there, ", "friend"):
        await streamed.on_event(TextDelta(piece))
    shown = drained(streamed)
    assert ("Hello there," in shown and "friend".startswith(shown[13:])) or shown
    await streamed.on_event(ModelCallFinished(1, "Hello there, friend", 0))
    assert (
        shown + drained(streamed) + streamed.rest("Hello there, friend")
    ) == "Hello there, friend"


async def test_a_forming_no_reply_is_never_shown_and_a_silent_reply_sends_nothing() -> None:
    streamed = StreamedText()
    for piece in ("NO_", "REP", "LY"):
        await streamed.on_event(TextDelta(piece))
    await streamed.on_event(ModelCallFinished(1, "NO_REPLY", 0))
    assert drained(streamed) == "" and streamed.rest("NO_REPLY") == ""


async def test_text_before_a_tool_stays_and_the_answer_follows_after_a_blank_line() -> None:
    streamed = StreamedText()
    await streamed.on_event(TextDelta("Let me look."))
    await streamed.on_event(ModelCallFinished(1, "Let me look.", 1))
    await streamed.on_event(TextDelta("Found it"))
    await streamed.on_event(ModelCallFinished(2, "Found it.", 0))
    text = drained(streamed) + streamed.rest("Found it.")
    assert text == "Let me look.\n\nFound it."
