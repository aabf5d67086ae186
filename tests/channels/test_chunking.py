"""split_markdown: limits, preferred cut points, code fences across cuts, content kept in order."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.chunking import MarkdownChunk, split_markdown, split_markdown_chunks
from channels.formatting import utf16_len

# -- an independent reading of the guarantees, used by every test below --


def fence_openers(text: str) -> list[str]:
    """The opening lines of the fences in `text`, in order; a last unclosed one included."""
    openers: list[str] = []
    marker: str | None = None
    for line in text.split("\n"):
        if marker is None:
            match = re.fullmatch(r"[ \t]*(`{3,}|~{3,})([^\n]*)", line)
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                marker = match.group(1)
                openers.append(line)
        else:
            stripped = line.strip()
            if len(stripped) >= len(marker) and stripped == marker[0] * len(stripped):
                marker = None
    return openers


def open_fence_after(chunk: str) -> str | None:
    """The marker of the fence still open at the end of `chunk` (None: all closed)."""
    marker: str | None = None
    for line in chunk.split("\n"):
        if marker is None:
            match = re.fullmatch(r"[ \t]*(`{3,}|~{3,})([^\n]*)", line)
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                marker = match.group(1)
        else:
            stripped = line.strip()
            if len(stripped) >= len(marker) and stripped == marker[0] * len(stripped):
                marker = None
    return marker


def repairable(opener: str, limit: int) -> bool:
    """The documented promise: fences whose bare marker needs at most half the limit."""
    marker = re.match(r"[ \t]*(`+|~+)", opener)
    assert marker is not None
    return 2 * len(marker.group(1)) + 2 <= limit // 2


def assert_well_formed(text: str, chunks: list[MarkdownChunk], limit: int) -> None:
    """Each chunk fits, has content, and the bodies are the input minus whitespace gaps."""
    position = 0
    for chunk in chunks:
        assert len(chunk.text) <= limit
        assert chunk.body.strip(), "empty chunk"
        assert not chunk.text.startswith("\n")
        assert chunk.text == chunk.text.rstrip()
        found = text.find(chunk.body, position)
        assert found >= 0, f"chunk body not found in order: {chunk.body!r}"
        assert not text[position:found].strip(), f"non-whitespace dropped: {text[position:found]!r}"
        position = found + len(chunk.body)
    assert not text[position:].strip(), f"text lost at the end: {text[position:]!r}"
    assert [chunk.text for chunk in chunks] == split_markdown(text, limit)


# -- table tests --


def test_empty_and_whitespace_text_give_no_chunks() -> None:
    assert split_markdown("") == []
    assert split_markdown(" \n\t\n  ") == []


def test_short_text_is_one_chunk_without_surrounding_blank_lines() -> None:
    assert split_markdown("\n\nHello **there**.\n\n") == ["Hello **there**."]


def test_limit_below_one_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        split_markdown("hello", 0)


def test_cuts_at_the_paragraph_break_rather_than_a_later_line_break() -> None:
    first = "First paragraph line one.\nFirst paragraph line two."
    second = "Second paragraph.\nMore of it here, enough to overflow."
    chunks = split_markdown(f"{first}\n\n{second}", 70)
    assert chunks == [first, second]


def test_cuts_at_a_line_break_when_there_is_no_paragraph_break() -> None:
    lines = [f"line number {n} of the reply" for n in range(6)]
    chunks = split_markdown("\n".join(lines), 60)
    assert all(chunk in {"\n".join(lines[i : i + 2]) for i in range(0, 6, 2)} for chunk in chunks)
    assert len(chunks) == 3


def test_cuts_after_a_sentence_rather_than_between_words() -> None:
    text = "This is the first sentence here. This is the second one that overflows the limit."
    chunks = split_markdown(text, 50)
    assert chunks[0] == "This is the first sentence here."
    assert " ".join(chunks) == text


def test_cuts_between_words_in_a_long_sentence() -> None:
    text = " ".join(f"word{n}" for n in range(40))
    chunks = split_markdown(text, 50)
    assert " ".join(chunks) == text
    assert all(not chunk.startswith(" ") and len(chunk) <= 50 for chunk in chunks)


def test_a_20k_character_line_is_hard_cut_without_losing_anything() -> None:
    text = "x" * 20_000
    chunks = split_markdown(text, 50)
    assert "".join(chunks) == text
    assert all(len(chunk) == 50 for chunk in chunks)


def test_code_fence_is_closed_and_reopened_with_its_language_across_a_cut() -> None:
    code = "\n".join(f"print({n})  # step {n}" for n in range(10))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nThat's all."
    chunks = split_markdown(text, 80)
    assert len(chunks) > 2
    for chunk in chunks:
        assert open_fence_after(chunk) is None, chunk
    assert chunks[1].startswith("```python\n")
    assert chunks[0].endswith("\n```")
    bodies = [c.body for c in split_markdown_chunks(text, 80)]
    assert "\n".join(bodies).count("print(") == 10


def test_tilde_fences_and_long_markers_are_repaired_with_the_same_marker() -> None:
    code = "\n".join(f"```inner {n}" if n % 3 == 0 else f"line {n}" for n in range(12))
    text = f"~~~~ js\n{code}\n~~~~"
    chunks = split_markdown_chunks(text, 60)
    assert len(chunks) > 1
    for chunk in chunks[1:]:
        assert chunk.reopen == "~~~~ js"
    for chunk in chunks[:-1]:
        assert chunk.close == "~~~~"
    assert all(open_fence_after(chunk.text) is None for chunk in chunks)


def test_indentation_of_code_lines_survives_the_cut() -> None:
    body = "\n".join(f"    return value_{n}" for n in range(8))
    text = f"```python\ndef f():\n{body}\n```"
    chunks = split_markdown_chunks(text, 60)
    for chunk in chunks[1:]:
        assert chunk.body.startswith("    return")


def test_a_fence_never_closed_is_closed_in_every_chunk() -> None:
    text = "```bash\n" + "\n".join(f"echo {n}" for n in range(30))
    chunks = split_markdown(text, 50)
    assert all(chunk.endswith("\n```") for chunk in chunks)
    assert all(open_fence_after(chunk) is None for chunk in chunks)


def test_no_chunk_starts_with_a_reopened_fence_holding_only_its_closing_line() -> None:
    for limit in range(30, 60):
        text = f"```\n{'a' * 20}\n{'b' * 20}\n```\n\nafter the code"
        for chunk in split_markdown(text, limit):
            assert not chunk.startswith("```\n```"), (limit, chunk)
            assert not chunk.endswith("```\n```"), (limit, chunk)


def test_fence_with_a_long_info_string_falls_back_to_the_bare_marker() -> None:
    info = "python title='an extremely long title for this block'"
    text = f"```{info}\n" + "\n".join(f"x = {n}" for n in range(20)) + "\n```"
    chunks = split_markdown_chunks(text, 50)
    assert chunks[0].body.startswith(f"```{info}"[:20]) or chunks[0].reopen == ""
    for chunk in chunks[1:]:
        assert chunk.reopen == "```"
    assert all(len(chunk.text) <= 50 for chunk in chunks)


def test_hard_cut_does_not_split_an_emoji_zwj_sequence() -> None:
    family = "👨\u200d👩\u200d👧"
    text = ("x" * 48) + family + ("y" * 10)
    chunks = split_markdown(text, 50)
    assert "".join(chunks) == text
    assert all("\u200d" not in (chunk[0], chunk[-1]) for chunk in chunks)


def test_inline_code_with_nested_backticks_is_not_mistaken_for_a_fence() -> None:
    text = "Use ``a ` b`` here.\n" + "```not a fence``` on its own line\n" + "more text " * 10
    chunks = split_markdown(text, 60)
    assert all(open_fence_after(chunk) is None for chunk in chunks)
    assert_well_formed(text, split_markdown_chunks(text, 60), 60)


def test_a_long_code_line_is_not_cut_where_a_piece_would_read_as_a_fence() -> None:
    for limit in range(40, 70):
        for width in range(20, 70):
            text = f"```\n{'a' * width}````tail\n{'b' * width}```\n```\nafter"
            chunks = split_markdown(text, limit)
            for chunk in chunks:
                assert open_fence_after(chunk) is None, (limit, width, chunks)


def test_limit_one_still_makes_progress() -> None:
    text = "ab\n\ncd ```\nef"
    chunks = split_markdown_chunks(text, 1)
    assert "".join(chunk.body for chunk in chunks) == "abcd```ef"
    assert_well_formed(text, chunks, 1)


# -- properties --

prose_word = st.text(alphabet="abcxyz_*`~#>.!?😀-|[]()", min_size=1, max_size=12)
prose_line = st.lists(prose_word, max_size=14).map(" ".join)
paragraph = st.lists(prose_line, min_size=1, max_size=5).map("\n".join)
code_line = st.one_of(
    st.text(alphabet="abc xyz()=;{}`~<>\t😀", max_size=70),
    st.text(alphabet="ab`~ ", min_size=30, max_size=200),  # longer than the room left
)
code_block = st.builds(
    lambda marker, info, body, closed: (
        f"{marker}{info}\n" + "\n".join(body) + (f"\n{marker}" if closed else "")
    ),
    st.sampled_from(["```", "````", "~~~", "~~~~"]),
    st.sampled_from(["", "python", "js", " html"]),
    st.lists(code_line, max_size=12),
    st.booleans(),
)
long_line = st.integers(min_value=60, max_value=700).map(lambda n: ("wörd" * n)[:n])
markdown = st.lists(st.one_of(paragraph, code_block, long_line), min_size=1, max_size=8).map(
    "\n\n".join
)


@given(text=st.text(), limit=st.integers(min_value=1, max_value=300))
def test_any_text_gives_chunks_within_limit_with_content_kept_in_order(
    text: str, limit: int
) -> None:
    assert_well_formed(text, split_markdown_chunks(text, limit), limit)


@given(text=markdown, limit=st.integers(min_value=50, max_value=400))
@settings(max_examples=200)
def test_markdown_chunks_fit_keep_order_and_balance_every_fence(text: str, limit: int) -> None:
    chunks = split_markdown_chunks(text, limit)
    assert_well_formed(text, chunks, limit)
    if all(repairable(opener, limit) for opener in fence_openers(text)):
        for chunk in chunks:
            assert open_fence_after(chunk.text) is None, chunk.text


@given(text=markdown, limit=st.integers(min_value=50, max_value=400))
def test_chunks_that_start_inside_a_fence_reopen_it_with_the_original_line(
    text: str, limit: int
) -> None:
    chunks = split_markdown_chunks(text, limit)
    for before, after in itertools.pairwise(chunks):
        if before.close:
            assert after.reopen, "a fence closed at a cut must be reopened"
            assert after.reopen.lstrip()[:3] == before.close.lstrip()[:3]


def test_measure_resplits_chunks_that_are_too_long_the_platforms_way() -> None:
    text = "😀" * 3000 + "\n\n```python\n" + "x = '😀'\n" * 400 + "```"
    plain = split_markdown(text, 4000)
    assert any(utf16_len(c) > 4000 for c in plain)  # emoji count twice in UTF-16
    chunks = split_markdown(text, 4000, measure=utf16_len)
    assert all(utf16_len(c) <= 4000 for c in chunks)
    assert "".join(chunks).count("😀") == text.count("😀")
    assert all(c.count("```") % 2 == 0 for c in chunks)


@given(st.text(alphabet="ab😀𝄞\n `*", max_size=300), st.integers(min_value=8, max_value=60))
def test_measured_chunks_always_fit(text: str, limit: int) -> None:
    for chunk in split_markdown(text, limit, measure=utf16_len):
        assert utf16_len(chunk) <= limit
