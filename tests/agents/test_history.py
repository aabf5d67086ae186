"""The history pipeline: turn limit, tool-result pruning, pairing repair and validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.history import (
    CLEARED_TOOL_RESULT,
    MISSING_TOOL_RESULT,
    PRUNE_RATIO,
    estimate_tokens,
    limit_turns,
    prepare_history,
    prune_tool_results,
    repair_tool_pairing,
    validate_history,
)
from agents.history_images import AGED_OUT, age_out_images
from agents.history_inputs import MAX_INPUT_CHARS, cut_long_inputs
from agents.model import Message
from agents.tool_images import without_tool_images


def user(*blocks: dict[str, Any] | str) -> Message:
    return {"role": "user", "content": [_block(b) for b in blocks]}


def assistant(*blocks: dict[str, Any] | str) -> Message:
    return {"role": "assistant", "content": [_block(b) for b in blocks]}


def _block(b: dict[str, Any] | str) -> dict[str, Any]:
    return {"type": "text", "text": b} if isinstance(b, str) else b


def use(tool_id: str, name: str = "read_file") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"path": "a.md"}}


def result(tool_id: str, content: Any = "ok", **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def missing(tool_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": MISSING_TOOL_RESULT,
        "is_error": True,
    }


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}

A_TOOL_LOOP = [
    user("read my notes"),
    assistant("Let me look.", use("t1"), use("t2")),
    user(result("t1", "buy milk"), result("t2", [{"type": "text", "text": "call mom"}])),
    assistant("Your notes: buy milk, call mom."),
    user("thanks", IMAGE),
    assistant("You're welcome."),
]


# --- limit_turns ------------------------------------------------------------------------------


def test_limit_turns_keeps_the_last_user_turns_with_their_tool_loops() -> None:
    history = [user("one"), assistant("1"), *A_TOOL_LOOP]
    assert limit_turns(history, 2) == A_TOOL_LOOP
    assert limit_turns(history, 1) == A_TOOL_LOOP[4:]


def test_tool_result_messages_are_not_user_turns() -> None:
    assert limit_turns(A_TOOL_LOOP, 2) == A_TOOL_LOOP


@pytest.mark.parametrize("max_turns", [0, -1, 3, 100])
def test_limit_turns_keeps_everything_when_unlimited_or_under_the_limit(max_turns: int) -> None:
    assert limit_turns(A_TOOL_LOOP, max_turns) == A_TOOL_LOOP


def test_limit_turns_returns_copies() -> None:
    limited = limit_turns(A_TOOL_LOOP, 1)
    limited[0]["content"][0]["text"] = "changed"
    assert A_TOOL_LOOP[4]["content"][0]["text"] == "thanks"


# --- estimate_tokens --------------------------------------------------------------------------


def test_estimate_tokens_is_chars_over_four_plus_images() -> None:
    assert estimate_tokens([user("x" * 8)]) == 2
    assert estimate_tokens([user("x" * 9)]) == 3
    assert estimate_tokens([user("abcd", IMAGE)]) == 1 + 1600
    assert estimate_tokens([user(result("t", "y" * 40))]) == 10
    assert estimate_tokens([]) == 0


# --- prune_tool_results -----------------------------------------------------------------------


def _tool_history(old_sizes: list[int], recent_size: int) -> list[Message]:
    """First user message, old tool loops of the given result sizes, then 3 recent assistants."""
    history = [user(result("orphan-in-first", "F" * 9000), "start")]
    for n, size in enumerate(old_sizes):
        history += [assistant(use(f"old{n}")), user(result(f"old{n}", f"{n}:" + "r" * size))]
    history += [
        assistant(use("new1")),
        user(result("new1", "N" * recent_size)),
        assistant(use("new2")),
        user(result("new2", "M" * recent_size)),
        assistant("All done."),
    ]
    return history


def _result_content(message: Message) -> Any:
    return message["content"][0]["content"]


def test_prune_leaves_history_alone_under_the_soft_ratio() -> None:
    history = _tool_history([10000], 10000)
    assert prune_tool_results(history, context_window_tokens=1_000_000) == history


def test_soft_trim_keeps_head_and_tail_of_old_large_results() -> None:
    history = _tool_history([10000, 3000], 10000)
    tokens = estimate_tokens(history)
    pruned = prune_tool_results(history, context_window_tokens=int(tokens / 0.4))
    trimmed = _result_content(pruned[2])
    original = _result_content(history[2])
    assert trimmed.startswith(original[:1500])
    assert trimmed.endswith(original[-1500:])
    assert "[... 7002 characters trimmed ...]" in trimmed
    assert _result_content(pruned[4]) == _result_content(history[4])  # under 4000: kept
    assert pruned[0] == history[0]  # the first user message is protected
    assert pruned[5:] == history[5:]  # the last 3 assistant messages and their results


def test_soft_trim_reaches_text_blocks_inside_list_content() -> None:
    history = _tool_history([], 10)
    history[1:1] = [
        assistant(use("listy")),
        user(result("listy", [{"type": "text", "text": "L" * 9000}, IMAGE])),
    ]
    pruned = prune_tool_results(history, context_window_tokens=int(estimate_tokens(history) / 0.35))
    inner = pruned[2]["content"][0]["content"]
    assert len(inner[0]["text"]) < 3100
    assert inner[1] == IMAGE


def test_hard_clear_replaces_oldest_results_until_under_the_hard_ratio() -> None:
    history = _tool_history([3000] * 10, 3000)
    window = 10_000
    assert estimate_tokens(history) / window > 0.5
    pruned = prune_tool_results(history, context_window_tokens=window)

    old_results = [_result_content(pruned[i]) for i in range(2, 22, 2)]
    cleared = [c == CLEARED_TOOL_RESULT for c in old_results]
    assert cleared == sorted(cleared, reverse=True)  # a prefix: oldest first
    k = cleared.count(True)
    assert 0 < k < 10
    assert estimate_tokens(pruned) / window < 0.5
    one_fewer = copy.deepcopy(pruned)
    one_fewer[2 * k]["content"][0]["content"] = _result_content(history[2 * k])
    assert estimate_tokens(one_fewer) / window >= 0.5  # it stopped as soon as it could
    assert pruned[0] == history[0]
    assert pruned[21:] == history[21:]


def test_hard_clear_is_skipped_when_old_results_are_too_small_to_matter() -> None:
    history = _tool_history([3000] * 10, 3000)
    pruned = prune_tool_results(history, context_window_tokens=10_000, min_hard_clear_chars=40_000)
    assert pruned == history


def test_hard_clear_never_touches_protected_messages_even_if_still_over() -> None:
    history = _tool_history([100], 50_000)
    pruned = prune_tool_results(history, context_window_tokens=1000, min_hard_clear_chars=0)
    assert _result_content(pruned[2]) == CLEARED_TOOL_RESULT
    assert pruned[0] == history[0]
    assert pruned[3:] == history[3:]


def test_prune_never_mutates_its_input() -> None:
    history = _tool_history([10000] * 5, 10000)
    before = copy.deepcopy(history)
    prune_tool_results(history, context_window_tokens=5000, min_hard_clear_chars=0)
    assert history == before


# --- repair_tool_pairing ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broken", "repaired"),
    [
        pytest.param(
            [user(result("t0")), assistant("hm"), user("hello"), assistant("hi")],
            [user("hello"), assistant("hi")],
            id="leading messages before the first plain user message are dropped",
        ),
        pytest.param(
            [user("hi"), assistant(use("t1")), user("what happened?")],
            [user("hi"), assistant(use("t1")), user(missing("t1"), "what happened?")],
            id="a missing tool result is synthesised",
        ),
        pytest.param(
            [user("hi"), assistant("checking", use("t1"), use("t2"))],
            [
                user("hi"),
                assistant("checking", use("t1"), use("t2")),
                user(missing("t1"), missing("t2")),
            ],
            id="a trailing tool_use is answered",
        ),
        pytest.param(
            [user("hi"), assistant(use("t1")), user(result("t9"), result("t1"))],
            [user("hi"), assistant(use("t1")), user(result("t1"))],
            id="an orphan tool result is dropped",
        ),
        pytest.param(
            [user("hi"), assistant("ok"), user(result("t1")), assistant("bye")],
            [user("hi"), assistant("ok", "bye")],
            id="a message of orphans disappears and its neighbours merge",
        ),
        pytest.param(
            [user("hi"), assistant(use("t1")), user(result("t1", "a"), result("t1", "b"))],
            [user("hi"), assistant(use("t1")), user(result("t1", "a"))],
            id="a tool answered twice keeps its first result",
        ),
        pytest.param(
            [user("a"), user("b"), assistant("c")],
            [user("a", "b"), assistant("c")],
            id="consecutive user messages merge",
        ),
        pytest.param(
            [user("a"), assistant(use("t1")), assistant("more"), user(result("t1"))],
            [user("a"), assistant("more", use("t1")), user(result("t1"))],
            id="consecutive assistant messages merge with tool_use last",
        ),
        pytest.param(
            [user("hi"), assistant(use("t1")), user("thanks", result("t1"))],
            [user("hi"), assistant(use("t1")), user(result("t1"), "thanks")],
            id="tool results move before text",
        ),
        pytest.param(
            [user("hi", ""), assistant("  "), {"role": "assistant", "content": "plain"}],
            [user("hi"), assistant("plain")],
            id="empty text blocks and messages go, string content becomes a block",
        ),
        pytest.param(
            [
                {"role": "system", "content": "x"},
                "junk",
                user("hi", use("u1")),
                assistant(IMAGE, "x"),
            ],
            [user("hi"), assistant("x")],
            id="blocks a role may not carry and unknown roles are dropped",
        ),
        pytest.param(
            [user("a"), assistant(use("t1")), user(result("t1")), assistant(use("t1"))],
            [user("a"), assistant(use("t1")), user(result("t1"))],
            id="a reused tool_use id is dropped",
        ),
        pytest.param([], [], id="empty stays empty"),
        pytest.param([assistant("only me")], [], id="no user message leaves nothing"),
    ],
)
def test_repair_tool_pairing(broken: list[Message], repaired: list[Message]) -> None:
    assert repair_tool_pairing(broken) == repaired
    assert validate_history(repaired) == []


def test_repair_leaves_a_valid_history_unchanged() -> None:
    assert validate_history(A_TOOL_LOOP) == []
    assert repair_tool_pairing(A_TOOL_LOOP) == A_TOOL_LOOP


def test_repair_never_mutates_its_input() -> None:
    broken = [user("a"), user("b", result("x")), assistant(use("t1"))]
    before = copy.deepcopy(broken)
    repair_tool_pairing(broken)
    assert broken == before


# --- validate_history -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "problem"),
    [
        ([assistant("hi")], "must start with a user message"),
        ([user("a"), user("b")], "roles must alternate"),
        ([user("")], "non-whitespace text"),
        ([{"role": "user", "content": []}], "non-empty list"),
        ([{"role": "user", "content": "hi"}], "non-empty list"),
        ([user("a"), assistant(use("t1"))], "without a following tool_result"),
        ([user("a"), assistant(use("t1")), user("b")], "no tool_result for tool_use 't1'"),
        ([user("a"), assistant(use("t1")), user("b", result("t1"))], "must come before"),
        ([user(result("t1"))], "answers no tool_use"),
        ([user("a"), assistant(IMAGE)], "may not carry a 'image' block"),
        ([user("a"), assistant({"type": "tool_use", "id": "t", "name": "x"})], "input must be"),
        ([{"role": "system", "content": [{"type": "text", "text": "x"}]}], "role must be"),
    ],
)
def test_validate_history_names_the_problem(history: list[Message], problem: str) -> None:
    problems = validate_history(history)
    assert any(problem in p for p in problems), problems


# --- properties -------------------------------------------------------------------------------

_ids = st.sampled_from(["t1", "t2", "t3", "t4"])
_blocks = st.one_of(
    st.sampled_from(["hi", "", "  ", "ok"]).map(lambda t: {"type": "text", "text": t}),
    st.builds(use, _ids, st.sampled_from(["read_file", "exec"])),
    st.builds(
        lambda i, c, e: result(i, c, is_error=e),
        _ids,
        st.sampled_from(
            [
                "out",
                "",
                [{"type": "text", "text": "x"}],
                {"odd": 1},
                [{"type": "text", "text": "x"}, IMAGE],  # a tool that returned an image
                [IMAGE, IMAGE],
            ]
        ),
        st.booleans(),
    ),
    st.just(IMAGE),
    st.sampled_from(
        [
            {"type": "tool_use", "name": "x", "input": {}},
            {"type": "tool_use", "id": "t5", "name": "x", "input": "not a dict"},
            {"type": "tool_result"},
            {"text": "no type"},
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            "not a block",
        ]
    ),
)
_messages = st.lists(
    st.one_of(
        st.builds(
            lambda r, c: {"role": r, "content": c},
            st.sampled_from(["user", "assistant", "user", "assistant", "system"]),
            st.one_of(st.lists(_blocks, max_size=5), st.sampled_from(["plain", ""])),
        ),
        st.just("garbage"),
    ),
    max_size=14,
)


@settings(max_examples=300)
@given(_messages)
def test_repair_always_yields_a_valid_history_and_is_idempotent(messages: list[Message]) -> None:
    before = copy.deepcopy(messages)
    repaired = repair_tool_pairing(messages)
    assert validate_history(repaired) == []
    assert repair_tool_pairing(repaired) == repaired
    assert messages == before


@st.composite
def _valid_histories(draw: st.DrawFn) -> list[Message]:
    history: list[Message] = []
    next_id = 0
    for _ in range(draw(st.integers(0, 5))):
        history.append(user(draw(st.sampled_from(["hi", "and?", "thanks"]))))
        while draw(st.booleans()):
            ids = [f"t{next_id + k}" for k in range(draw(st.integers(1, 3)))]
            next_id += len(ids)
            history.append(assistant("working", *[use(i) for i in ids]))
            contents = st.sampled_from(["ok", "x" * 50, [{"type": "text", "text": "see"}, IMAGE]])
            answers = [result(i, draw(contents)) for i in ids]
            history.append(user(*draw(st.permutations(answers))))
        history.append(assistant(draw(st.sampled_from(["done", "sure"]))))
    return history


@given(_valid_histories())
def test_repair_leaves_any_valid_history_unchanged(history: list[Message]) -> None:
    assert validate_history(history) == []
    assert repair_tool_pairing(history) == history


@settings(max_examples=200)
@given(_messages, st.integers(0, 4), st.integers(1, 2000))
def test_prepare_history_always_yields_a_valid_history(
    messages: list[Message], max_turns: int, window: int
) -> None:
    prepared = prepare_history(messages, max_turns=max_turns, context_window_tokens=window)
    assert validate_history(prepared) == []


@given(_messages, st.integers(0, 4), st.integers(1, 2000))
def test_prepare_history_is_the_three_stages_and_never_mutates_its_input(
    messages: list[Message], max_turns: int, window: int
) -> None:
    before = copy.deepcopy(messages)
    limited = limit_turns(messages, max_turns)
    full = estimate_tokens(limited) >= PRUNE_RATIO * window  # pruning: a safety net only
    staged = repair_tool_pairing(prune_tool_results(limited, window) if full else limited)
    assert prepare_history(messages, max_turns=max_turns, context_window_tokens=window) == staged
    assert messages == before


def test_old_tool_results_are_sent_as_they_were_until_the_window_is_nearly_full() -> None:
    # Trimming an old result would change bytes already sent, and every later request would
    # miss the prompt cache from there on: under PRUNE_RATIO the history goes out whole.
    history = _tool_history([20_000] * 3, 100)
    whole = repair_tool_pairing(history)
    window = estimate_tokens(history) * 2  # half full: well over the soft ratio of old
    assert prepare_history(history, max_turns=10, context_window_tokens=window) == whole
    squeezed = prepare_history(history, max_turns=10, context_window_tokens=window // 2)
    assert squeezed != whole and validate_history(squeezed) == []


def test_prepare_history_limits_prunes_and_repairs() -> None:
    history = [
        assistant("stray"),
        user("old question"),
        assistant("old answer"),
        *_tool_history([20_000] * 3, 100)[1:],
    ]
    history.insert(3, user("the question"))
    prepared = prepare_history(history, max_turns=1, context_window_tokens=12_000)
    assert prepared[0] == user("the question")
    assert validate_history(prepared) == []
    assert any(
        b.get("content") == CLEARED_TOOL_RESULT or "characters trimmed" in str(b.get("content"))
        for m in prepared
        for b in m["content"]
    )


# --- tool-result images leave history as notes ---------------------------------------------


def _tool_images(messages: list[Message]) -> int:
    return sum(
        1
        for m in messages
        for b in m["content"]
        if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
        for p in b["content"]  # type: ignore[typeddict-item]
        if p.get("type") == "image"
    )


def test_tool_result_images_become_notes_and_user_images_stay() -> None:
    history = [
        user(IMAGE, "what is this?"),
        assistant("looking", use("t1")),
        user(result("t1", [{"type": "text", "text": "a pixel"}, IMAGE])),
        assistant("a pixel"),
    ]
    before = copy.deepcopy(history)
    stored = without_tool_images(history)
    assert history == before
    assert stored[0] is history[0] and stored[0]["content"][0] == IMAGE
    assert stored[2]["content"] == [
        result(
            "t1",
            [
                {"type": "text", "text": "a pixel"},
                {
                    "type": "text",
                    "text": "[image image/png, 1 bytes: shown to the model when the tool ran; "
                    "not kept in history]",
                },
            ],
        )
    ]
    assert estimate_tokens(stored) < estimate_tokens(history)


def test_pruning_clears_old_image_results_and_counts_their_images() -> None:
    old = [{"type": "text", "text": "0:" + "r" * 20_000}, IMAGE]
    history = _tool_history([20_000, 20_000], 100)
    history[2]["content"][0]["content"] = old  # type: ignore[typeddict-unknown-key]
    assert estimate_tokens(history) == estimate_tokens(_tool_history([20_000] * 2, 100)) + 1600
    pruned = prune_tool_results(history, 8_000, keep_last_assistants=1, min_hard_clear_chars=0)
    assert _result_content(pruned[2]) == CLEARED_TOOL_RESULT  # the image went with it
    assert "characters trimmed" in _result_content(pruned[4])
    assert validate_history(repair_tool_pairing(pruned)) == []


@settings(max_examples=200)
@given(_messages)
def test_stored_histories_keep_no_tool_images_and_stay_repairable(
    messages: list[Message],
) -> None:
    repaired = repair_tool_pairing(messages)
    before = copy.deepcopy(repaired)
    stored = without_tool_images(repaired)
    assert repaired == before
    assert _tool_images(stored) == 0
    assert validate_history(stored) == []
    assert without_tool_images(stored) == stored
    assert repair_tool_pairing(stored) == stored


@given(_valid_histories())
def test_notes_for_tool_images_keep_a_valid_history_valid(history: list[Message]) -> None:
    stored = without_tool_images(history)
    assert validate_history(stored) == []
    assert repair_tool_pairing(stored) == stored
    assert len(stored) == len(history)


def test_long_inputs_of_earlier_tool_calls_are_cut_in_what_is_sent() -> None:
    # A 100 KB document written last turn must not ride along with every later request.
    document = "head " + "x" * 100_000 + " tail"
    call = {"type": "tool_use", "id": "t1", "name": "write_file"}
    call["input"] = {"path": "doc.md", "content": document, "tags": ["y" * 9_000, "short"]}
    history = [user("write it"), assistant(call), user(result("t1")), assistant("Done.")]
    stored = copy.deepcopy(history)
    sent = prepare_history(history, max_turns=10, context_window_tokens=200_000)
    cut = sent[1]["content"][0]["input"]  # type: ignore[typeddict-item]
    assert cut["path"] == "doc.md" and cut["tags"][1] == "short"
    assert len(cut["content"]) < 4_000 and len(cut["tags"][0]) < 4_000
    assert cut["content"].startswith("head x") and cut["content"].endswith("x tail")
    assert "characters of this input left out of the history" in cut["content"]
    assert history == stored  # the stored messages are not touched
    short = [user("hi"), assistant(use("t2")), user(result("t2"))]
    assert prepare_history(short, max_turns=10, context_window_tokens=200_000) == short


@given(st.recursive(st.text(max_size=9_000), lambda inner: st.lists(inner, max_size=3)))
@settings(max_examples=40)
def test_cutting_inputs_keeps_short_strings_and_is_stable(value: Any) -> None:
    messages = [{"role": "assistant", "content": [{"type": "tool_use", "input": {"v": value}}]}]
    once = cut_long_inputs(messages)
    assert cut_long_inputs(once) == once  # a cut string is not cut again (a stable prefix)

    def strings(v: Any) -> list[str]:
        return [v] if isinstance(v, str) else [s for item in v for s in strings(item)]

    for before, after in zip(
        strings(value), strings(once[0]["content"][0]["input"]["v"]), strict=True
    ):
        assert after == before if len(before) <= MAX_INPUT_CHARS else len(after) < MAX_INPUT_CHARS


# --- user images age out -----------------------------------------------------------------------


def test_user_images_are_sent_for_a_few_turns_then_a_note_takes_their_place() -> None:
    photo = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg"}}
    photo["source"]["data"] = "A" * 4000  # 3,000 bytes
    history = [user(photo, "what is this?"), assistant("A heron.")]
    for n in range(3):
        history += [user(f"question {n}"), assistant(f"answer {n}")]
    before = copy.deepcopy(history)
    kept = prepare_history(history, max_turns=50, context_window_tokens=200_000)
    aged = prepare_history(history, max_turns=50, context_window_tokens=200_000, keep_image_turns=2)
    assert kept == history  # None: every image stays
    assert aged[0]["content"][0] == {
        "type": "text",
        "text": f"[image image/jpeg, 3000 bytes: {AGED_OUT}]",
    }
    assert aged[1:] == history[1:] and history == before  # the store's copy keeps the photo
    recent = [*history[2:], user(photo, "and this?"), assistant("A crane.")]
    assert age_out_images(recent, 2) == recent  # still among the last two turns
    assert age_out_images(aged, 2) == aged  # a note stays the same note: a stable prefix
