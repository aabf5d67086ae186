"""Reasoning and tool debris wherever a model puts it (issue 12), and the sanitizer's promises:
never raises, idempotent, code untouched, on any input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.sanitize import SETTLE_PASSES, sanitize_output


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Sure <thinking>the user wants a list</thinking> here it is.", "Sure here it is."),
        ("one<thought>p</thought> two<think>q</think> three", "one two three"),
        ("A <think>x</think> B <think>y</think> C <think>z</think> D", "A B C D"),
        ("a<think> </think>b", "ab"),
        ("Hi <think>  \n </think> there", "Hi there"),
        ("Hi <think></think>there", "Hi there"),
        ("x <antThinking>plan it</antThinking>y", "x y"),
        ("Answer. <think>the user will want more, so", "Answer."),
        ("Answer.<thinking>\nstill going", "Answer."),
        ("see <final>42</final>.", "see 42."),
        ("The result: <final>**done**</final> and more", "The result: **done** and more"),
        ("Done</tool_call> ok", "Done ok"),
        ("All set.</function_call>", "All set."),
        ("x </minimax:tool_call> y", "x y"),
        ("Done.\n</tool_call>\n</function_call>\nAll good.", "Done.\nAll good."),
        ('[Tool Result for search]\n{"hits": 3}\nThere are three hits.', "There are three hits."),
        (
            '[Tool Result for x]\n{"a": "}", "b": [1, 2]} So a is a brace.',
            "So a is a brace.",
        ),
        (
            '[Tool Result for x]\n[\n  {"n": 1},\n  {"n": 2}\n]\n\nTwo items.',
            "Two items.",
        ),
    ],
)
def test_debris_goes_wherever_it_stands(raw: str, expected: str) -> None:
    assert sanitize_output(raw) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "Wrap reasoning in `<think>` and close it with `</think>`.",
        "Write `<final>42</final>` to mark the answer.",
        "The closing tag is `</tool_call>`, don't forget it.",
        "```xml\n<think>x</think>\nsee <final>42</final>\n</tool_call>\n```",
        "a <think-foo>b</think-foo> c",
        "Custom tags like <thinker>Ann</thinker> and <finale> stay.",
        "Use <thinking> tags for reasoning and close with </thinking> at the end.",
        "Put the answer in a <final> block.",
        "If x < y and y > z then <b>bold</b>.",
        "The log prints [Tool Result] mid-sentence here.",
    ],
)
def test_code_mentions_and_look_alikes_are_untouched(reply: str) -> None:
    assert sanitize_output(reply) == reply


def test_thousands_of_private_use_characters_do_not_exhaust_the_masker() -> None:
    private = "".join(chr(cp) for cp in range(0xE000, 0xF900))  # all 6,400 of them
    reply = f"{private} `code` <think>hidden</think>shown `more code`"
    assert sanitize_output(reply) == f"{private} `code` shown `more code`"
    assert sanitize_output(private * 2) == private * 2


def test_text_that_looks_like_a_placeholder_survives() -> None:
    reply = "\ue000" + "0" + "\ue002 and `x` and \ue000\ue001 and \ue0001\ue002"
    assert sanitize_output(reply) == reply


def test_a_placeholder_look_alike_inside_inline_code_is_restored_exactly() -> None:
    reply = "`\ue001]\ue0001```[System Message]`\ue000"
    once = sanitize_output(reply)
    assert sanitize_output(once) == once
    assert once == reply


def _nested_debris(levels: int) -> str:
    text = "<think>core</think>"
    for _ in range(levels):
        text = f"<thi{text}nk>x</think>"
    return f"Before. {text} After."


@pytest.mark.parametrize("levels", [1, 3, SETTLE_PASSES + 1, 200, 3000])
def test_deliberately_nested_debris_is_fully_removed_in_one_call(levels: int) -> None:
    once = sanitize_output(_nested_debris(levels))
    assert sanitize_output(once) == once
    assert "think" not in once
    assert once.startswith("Before.")


def test_nested_final_and_tool_debris_settle() -> None:
    raw = (
        "<fi<final>nal>" * 50 + "Answer" + "</final>" * 60 + "\n" + "</tool_</tool_call>call>" * 50
    )
    once = sanitize_output(raw)
    assert sanitize_output(once) == once
    assert "<final" not in once and "</final" not in once and "tool_call" not in once
    assert "Answer" in once


FRAGMENTS = [
    "<think>",
    "</think>",
    "<thinking>",
    "<thi",
    "nk>",
    "<final>",
    "</final>",
    "<tool_call>",
    "</tool_call>",
    "</minimax:tool_call>",
    "[Tool Result for x]",
    "[Tool Call: x]",
    "[System Message]",
    '{"a": "}"}',
    "[",
    "]",
    "```",
    "~~~",
    "`",
    "``",
    "\n",
    "\n\n",
    " ",
    "word",
    "<",
    ">",
    "/",
    "\ue000",
    "\ue001",
    "\ue002",
    "1",
]
replies = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join) | st.text()


@settings(max_examples=400)
@given(replies)
def test_sanitize_output_never_raises_and_is_idempotent(text: str) -> None:
    once = sanitize_output(text)
    assert sanitize_output(once) == once


code_body = st.lists(st.sampled_from([*FRAGMENTS[:-4], "x", "y"]), max_size=12).map("".join)


@settings(max_examples=300)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=20).map("".join),
    code_body.filter(lambda s: "`" not in s and "\n" not in s),
    code_body.filter(lambda s: "```" not in s and "~~~" not in s),
    st.lists(st.sampled_from(FRAGMENTS), max_size=20).map("".join),
)
def test_code_fences_and_inline_code_are_untouched(
    before: str, inline: str, fenced: str, after: str
) -> None:
    inline_code = f"`{inline}`" if inline.strip() else "`x`"
    fence = f"```\n{fenced}\n```"
    # Debris before the fence can't reach past it; the inline code stands in clean prose.
    before = before.replace("`", "").replace("~", "")
    noisy = f"{before}\n\n{fence}\nOutro {inline_code} text.\n\n{after.replace('`', '')}"
    cleaned = sanitize_output(noisy)
    assert inline_code in cleaned
    assert fence in cleaned
