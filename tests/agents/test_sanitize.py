"""The output sanitizer, NO_REPLY and HEARTBEAT_OK rules, and the streaming silent filter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.sanitize import (
    SANITIZE_STEPS,
    SilentTokenFilter,
    collapse_consecutive_duplicate_blocks,
    is_silent,
    sanitize_output,
    strip_downgraded_tool_call_text,
    strip_echoed_system_messages,
    strip_final_tags,
    strip_garbled_tool_xml,
    strip_heartbeat_ok,
    strip_leading_blank_lines,
    strip_silent_token,
    strip_thinking_tags,
)

# --- the seven steps, each on its own -------------------------------------------------------


def test_steps_run_in_the_order_of_the_seed() -> None:
    assert [s.__name__ for s in SANITIZE_STEPS] == [
        "strip_garbled_tool_xml",
        "strip_downgraded_tool_call_text",
        "strip_thinking_tags",
        "strip_final_tags",
        "strip_echoed_system_messages",
        "collapse_consecutive_duplicate_blocks",
        "strip_leading_blank_lines",
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            "",
        ),
        (
            'Let me check.<tool_call>{"name": "web_fetch", "arguments": {}}</tool_call>\n'
            "It is sunny.",
            "Let me check.\nIt is sunny.",
        ),
        (
            '<function_call>{"name": "search", "arguments": {"q": "cats"}}</function_call>'
            "\nHere are cats.",
            "\nHere are cats.",
        ),
        (
            '<minimax:tool_call>\n<invoke name="search">\n<parameter name="q">cats</parameter>'
            "\n</invoke>\n</minimax:tool_call>",
            "",
        ),
        ('Sure.\n<tool_call>\n{"name": "search", "argum', "Sure.\n"),
        ("Done.\n</tool_call>\nAll good.", "Done.\nAll good."),
        ("The model emits <tool_call> tags when confused.", None),
        ("Wrap it as <invoke name=x> and you're done.", None),
    ],
)
def test_strip_garbled_tool_xml(raw: str, expected: str | None) -> None:
    assert strip_garbled_tool_xml(raw) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            '[Tool Call: get_weather (ID: t1)]\nArguments: {"city": "Paris"}\n\n'
            "It is sunny in Paris.",
            "It is sunny in Paris.",
        ),
        (
            '[Tool Call: search]\n{\n  "q": "cats",\n  "n": 3\n}\nHere are three cats.',
            "Here are three cats.",
        ),
        ("[Tool Result for ID t1]\nSunny, 20C\nWind 5 km/h\n\nIt is sunny.", "It is sunny."),
        (
            'Before.\n[Historical context: a different model called tool "x" with '
            'arguments: {"a": 1}. Do not mimic this format.]\nAfter.',
            "Before.\nAfter.",
        ),
        ("I used [Tool Call: x] syntax once.", None),
    ],
)
def test_strip_downgraded_tool_call_text(raw: str, expected: str | None) -> None:
    assert strip_downgraded_tool_call_text(raw) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<think>\nThe user wants X.\nLet me think.\n</think>\n\nHere is X.", "\n\nHere is X."),
        ("<think>hmm</think>Hello", "Hello"),
        ("<THINKING>plan</THINKING>\nAnswer", "\nAnswer"),
        ("<thought>a</thought>B", "B"),
        ("<antThinking>x</antThinking>Y", "Y"),
        ("Sure!<think>\nsecret plan\n</think>\nHere you go.", "Sure!\nHere you go."),
        ("Answer first.\n<think>\nunfinished reasoning that was cut off", "Answer first.\n"),
        ("reasoning\n</think>\nAnswer", "reasoning\nAnswer"),
        ("Use <thinking> tags for reasoning and close with </thinking> at the end.", None),
    ],
)
def test_strip_thinking_tags(raw: str, expected: str | None) -> None:
    assert strip_thinking_tags(raw) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<final>The answer is 4.</final>", "The answer is 4."),
        ("<final>\nLine one\nLine two\n</final>", "\nLine one\nLine two\n"),
        ("Put the answer in a <final> block.", None),
    ],
)
def test_strip_final_tags(raw: str, expected: str | None) -> None:
    assert strip_final_tags(raw) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            "Hi\n\n[System Message] Sub-agent finished.\nStats: 3 tools\n\nDone.",
            "Hi\n\nDone.",
        ),
        ("[System Message] cron fired\nreply with the summary", ""),
        ("The string [System Message] appears in logs.", None),
    ],
)
def test_strip_echoed_system_messages(raw: str, expected: str | None) -> None:
    assert strip_echoed_system_messages(raw) == (raw if expected is None else expected)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Hello there.\n\nHello there.\n\nHow can I help?", "Hello there.\n\nHow can I help?"),
        ("A\n\nA\n\nA", "A"),
        ("Use `x`.\n\nUse `x`.", "Use `x`."),
        ("A\n\nB\n\nA", None),
        ("line\nline\nline", None),
        ("- same\n- same", None),
    ],
)
def test_collapse_consecutive_duplicate_blocks(raw: str, expected: str | None) -> None:
    assert collapse_consecutive_duplicate_blocks(raw) == (raw if expected is None else expected)


def test_strip_leading_blank_lines_keeps_indentation() -> None:
    assert strip_leading_blank_lines("\n  \n\t\n    code\nmore") == "    code\nmore"


# --- the whole pipeline ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ""),
        ("  Hello!  \n", "Hello!"),
        ('<tool_call>{"name": "x"}</tool_call>', ""),
        (
            "<think>\nThey want a haiku.\n</think>\n\n<final>Autumn moonlight\n"
            "a worm digs silently\ninto the chestnut.</final>",
            "Autumn moonlight\na worm digs silently\ninto the chestnut.",
        ),
        (
            "\n\nSure.\n\nSure.\n\n[System Message] job done\nStats: ok\n\nBye",
            "Sure.\n\nBye",
        ),
        (
            '[Tool Call: read_file (ID: a)]\nArguments: {"path": "notes.md"}\n\n'
            "Your notes say: buy milk.",
            "Your notes say: buy milk.",
        ),
    ],
)
def test_sanitize_output_cleans_leaked_artifacts(raw: str, expected: str) -> None:
    assert sanitize_output(raw) == expected


ORDINARY_REPLIES = [
    "Here is the config you asked for:\n\n```xml\n<tool_call>\n  <name>x</name>\n"
    "</tool_call>\n<think>keep me</think>\n```\n\nSave it as `tools.xml`.",
    "```python\nfor i in range(3):\n    print(i)\n\n\n    print(i)\n\n    print(i)\n```",
    "~~~\nsame\n\nsame\n\nsame\n~~~",
    "| Name | Qty |\n|------|-----|\n| Milk | 1 |\n| Milk | 1 |\n\nTotal: 2",
    "1. First\n2. Second\n   - nested `code`\n\n> quoted <final> text",
    "Wrap your reasoning in `<think>` tags and your answer in `<final>` tags.",
    "Use `[Tool Call: x]` lines only in `NO_REPLY` examples.",
    "Say NO_REPLY when there is nothing to add, and HEARTBEAT_OK for heartbeats.",
    "```html\n<p>Hello</p>\n\n<p>Hello</p>\n```",
    "Emoji 🎉 and ünïcödé survive.",
    "- [ ] todo\n- [x] done",
    "Steps:\n\n    indented code block\n\nEnd.",
]


@pytest.mark.parametrize("reply", ORDINARY_REPLIES)
def test_sanitize_output_leaves_ordinary_replies_alone(reply: str) -> None:
    assert sanitize_output(reply) == reply


def test_fenced_code_is_byte_for_byte_untouched_by_every_step() -> None:
    fence = (
        "```\n<tool_call>{}</tool_call>\n[Tool Call: x]\n<think>\nt\n</think>\n<final>f</final>\n"
        "[System Message] s\n\ndup\n\ndup\n```"
    )
    text = f"Before\n\n{fence}\n\nAfter"
    for step in SANITIZE_STEPS:
        assert fence in step(text), step.__name__
    assert fence in sanitize_output(text)


def test_unclosed_fence_runs_to_the_end_and_is_untouched() -> None:
    text = "Start:\n```\n<think>\nstill code\n</think>\n\nx\n\nx"
    assert sanitize_output(text) == text


def test_leaks_around_a_fence_are_cleaned_but_the_fence_stays() -> None:
    raw = "<think>\nplan it\n</think>\nHere:\n```sh\nls -la\n```\n<final>Done.</final>"
    assert sanitize_output(raw) == "Here:\n```sh\nls -la\n```\nDone."


def test_removing_one_tag_exposing_another_is_still_cleaned() -> None:
    assert sanitize_output("<final><final>Answer</final></final>") == "Answer"
    assert sanitize_output("<think>\nx\n</think><think>\ny\n</think>\nAnswer") == "Answer"


FRAGMENTS = [
    "<think>",
    "</think>",
    "<thinking>",
    "<tool_call>",
    "</tool_call>",
    "<final>",
    "</final>",
    "[Tool Call: x]",
    "[Tool Result 1]",
    "[System Message]",
    '{"a": 1}',
    "```",
    "~~~",
    "`",
    "\n",
    "\n\n",
    " ",
    "  ",
    "word",
    "Hello.",
    "NO_REPLY",
    "|a|b|",
    '<invoke name="x">',
    "</invoke>",
    "<",
    ">",
    "\ue000",
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join) | st.text())
def test_sanitize_output_is_idempotent_and_never_raises(text: str) -> None:
    once = sanitize_output(text)
    assert sanitize_output(once) == once
    assert once == once.strip()


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join))
def test_sanitize_output_never_grows_text(text: str) -> None:
    assert len(sanitize_output(text)) <= len(text)


# --- NO_REPLY ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "silent"),
    [
        ("NO_REPLY", True),
        ("  NO_REPLY \n", True),
        ("NO_REPLY.", False),
        ("no_reply", False),
        ("NO_REPLY but here is text", False),
        ("", False),
    ],
)
def test_is_silent_only_for_exactly_no_reply(text: str, silent: bool) -> None:
    assert is_silent(text) is silent


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLY", ""),
        ("  NO_REPLY  ", ""),
        ("**NO_REPLY**", ""),
        ("NO_REPLY.", ""),
        (
            "NO_REPLY: nothing new, but FYI the build passed.",
            "nothing new, but FYI the build passed.",
        ),
        (
            "NO_REPLY\n\nActually, one thing: the door is open.",
            "Actually, one thing: the door is open.",
        ),
        ("Noted, I'll remember that.\n\nNO_REPLY", "Noted, I'll remember that."),
        ("Done. NO_REPLY", "Done."),
        ("Done.\n**NO_REPLY**\n", "Done."),
        ("Reply NO_REPLY when you have nothing to say.", None),
        ("I answered NO_REPLY yesterday, which was wrong.", None),
        ("NO_REPLYING is not a word", None),
        ("x_NO_REPLY", None),
        ("use**NO_REPLY**", None),
        ("NO_REPLY NO_REPLY", ""),
        ("hello world", None),
        ("", None),
    ],
)
def test_strip_silent_token(text: str, expected: str | None) -> None:
    assert strip_silent_token(text) == (text if expected is None else expected)


def _stream(text: str, cuts: list[int]) -> list[str]:
    silent = SilentTokenFilter()
    shown, previous = [], 0
    for cut in [*sorted(set(cuts)), len(text)]:
        shown.append(silent.feed(text[previous:cut]))
        previous = cut
    shown.append(silent.flush())
    return shown


SILENT_FRAGMENTS = [
    "NO_REPLY",
    "NO_",
    "REPLY",
    "NO",
    "N",
    "*",
    "**",
    "_",
    "~",
    " ",
    "\n",
    ".",
    ":",
    "-",
    "a",
    "Hello",
    "x_",
    "é",
    "\u2003",
]


@given(
    st.lists(st.sampled_from(SILENT_FRAGMENTS), max_size=16).map("".join) | st.text(max_size=40),
    st.lists(st.integers(min_value=0, max_value=60), max_size=12),
)
def test_streamed_text_equals_strip_silent_token_for_any_split(text: str, cuts: list[int]) -> None:
    pieces = _stream(text, [c for c in cuts if c <= len(text)])
    assert "".join(pieces) == strip_silent_token(text)


@pytest.mark.parametrize(
    "text",
    [
        "Done.\n\nNO_REPLY",
        "Noted. **NO_REPLY**",
        "NO_REPLY",
        "Short answer. NO_REPLY   ",
    ],
)
def test_streamed_silent_token_is_never_shown_one_character_at_a_time(text: str) -> None:
    shown = "".join(_stream(text, list(range(len(text)))))
    assert shown == strip_silent_token(text)  # what was shown can't be taken back
    assert "NO_REPLY" not in shown
    assert not shown.endswith(("N", "NO", "NO_", "*"))


def test_stream_shows_ordinary_text_as_it_arrives() -> None:
    silent = SilentTokenFilter()
    assert silent.feed("Hello") == "Hello"
    assert silent.feed(" world ") == " world"  # the space may still precede a NO_REPLY
    assert silent.feed("!") == " !"
    assert silent.flush() == ""


def test_stream_holds_a_partial_token_until_it_is_decided() -> None:
    silent = SilentTokenFilter()
    assert silent.feed("It is done. NO_RE") == "It is done."
    assert silent.feed("PLY") == ""
    assert silent.flush() == ""


def test_stream_releases_a_partial_token_that_turns_out_to_be_text() -> None:
    silent = SilentTokenFilter()
    assert silent.feed("See NO") == "See"
    assert silent.feed("TES below") == " NOTES below"
    assert silent.flush() == ""


def test_stream_drops_a_leading_token_and_shows_the_rest() -> None:
    silent = SilentTokenFilter()
    assert silent.feed("NO_REP") == ""
    assert silent.feed("LY: ") == ""
    assert silent.feed("but FYI") == "but FYI"
    assert silent.flush() == ""


# --- HEARTBEAT_OK -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HEARTBEAT_OK", (True, "")),
        ("**HEARTBEAT_OK**", (True, "")),
        ("HEARTBEAT_OK.", (True, "")),
        ("`HEARTBEAT_OK`", (True, "")),
        ("All quiet. HEARTBEAT_OK", (True, "All quiet.")),
        ("HEARTBEAT_OK - nothing needs attention", (True, "nothing needs attention")),
        ("x" * 300 + "\nHEARTBEAT_OK", (True, "x" * 300)),
        ("x" * 301 + "\nHEARTBEAT_OK", (False, "x" * 301)),
        (
            "Your flight leaves at 9. Pack tonight.",
            (False, "Your flight leaves at 9. Pack tonight."),
        ),
        (
            "I said HEARTBEAT_OK earlier but now: call mom",
            (False, "I said HEARTBEAT_OK earlier but now: call mom"),
        ),
    ],
)
def test_strip_heartbeat_ok(text: str, expected: tuple[bool, str]) -> None:
    assert strip_heartbeat_ok(text) == expected


def test_strip_heartbeat_ok_honours_max_rest() -> None:
    assert strip_heartbeat_ok("12345 HEARTBEAT_OK", max_rest=4) == (False, "12345")
    assert strip_heartbeat_ok("1234 HEARTBEAT_OK", max_rest=4) == (True, "1234")


@pytest.mark.parametrize(
    "text",
    [
        "Hello world. " * 10000,
        "same\n\n" * 20000,
        "a <think> b " * 20000,
        "<think>\n" * 20000,
        "<tool_call> x " * 10000,
        "` `` " * 20000,
        "```\ncode\n```\ntext\n" * 5000,
        "[Tool Call: x]\n{\n" * 10000,
        "<final>" * 2000 + "x" + "</final>" * 2000,
        "<" * 100000,
    ],
)
@pytest.mark.timeout(30)
def test_sanitize_output_stays_fast_on_long_pathological_replies(text: str) -> None:
    # A super-linear pass would run for minutes on these: the test's timeout catches it.
    cleaned = sanitize_output(text)
    assert sanitize_output(cleaned) == cleaned


def test_identical_consecutive_fenced_blocks_are_both_kept() -> None:
    reply = "Run this:\n\n```\nmake\n```\n\n```\nmake\n```\n\nTwice, yes."
    assert collapse_consecutive_duplicate_blocks(reply) == reply
    assert sanitize_output(reply) == reply
