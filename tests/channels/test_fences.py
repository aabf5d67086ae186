"""One code-fence reader: the chunker, the sanitizer and the renderers agree on where code is.

`markup.fences` reads fences; `agents.sanitize.regions.split_fences` (what the sanitizer
leaves alone), `channels.markdown.parse_blocks` (what every renderer draws as code) and
`channels.chunking.split_markdown_chunks` (what each chunk shows as code once cut) must all
find the same code regions for the same text. The table holds the cases where the three
readers used to disagree.
"""

from __future__ import annotations

from bisect import bisect_right

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agents.sanitize import sanitize_output
from agents.sanitize.regions import split_fences
from channels.chunking import split_markdown_chunks
from channels.markdown import CodeBlock, parse_blocks
from markup.fences import Fence, FencedBlock, fenced_blocks, parse_fence

# -- text with many near-fences --

_INDENT = st.sampled_from(["", " ", "   ", "    ", "      ", "\t", " \t", "\u00a0", "\u3000"])
_MARKER = st.sampled_from(["```", "````", "`````", "~~~", "~~~~", "``", "~~", "`~~"])
_INFO = st.sampled_from(
    ["", "python", " js", "a`b", "`", " x|y", "~", "```", " ", "\t", "\u00a0", "\x0b", "\r", "\r\r"]
)
_PROSE = st.sampled_from(
    [
        "text",
        "> quote",
        "> ```",
        "- item",
        "  - ```",
        "a|b",
        "-|-",
        "| c | d |",
        "# heading",
        "",
        "   ",
        "x ``` y",
        "`code` and ``more``",
        "1. step",
        "***",
        "a\rb",
        "\r```",
    ]
)
_LINE = st.one_of(
    st.tuples(_INDENT, _MARKER, _INFO).map("".join),
    _PROSE,
    st.text(alphabet=" `~|>-\t\r\u00a0x", max_size=10),
)


def _joined(lines: list[tuple[str, str]]) -> str:
    # A named function, not a lambda: hypothesis describes a lambda by parsing its source,
    # which CPython 3.11.7's ast can fail at mid-run ("AST constructor recursion depth
    # mismatch"), seen with the lowest hypothesis this project allows.
    return "".join(line + end for line, end in lines)


MARKDOWNISH = st.lists(st.tuples(_LINE, st.sampled_from(["\n", "\n", "\r\n"])), max_size=24).map(
    _joined
) | st.text(max_size=80)


# -- what each reader says is code --


def line_by_line(text: str) -> list[tuple[int, int]]:
    """(start, end) of each block, read one line at a time with `parse_fence`/`closes`."""
    found: list[tuple[int, int]] = []
    fence: Fence | None = None
    start = offset = 0
    for line in text.split("\n"):
        if fence is None:
            fence = parse_fence(line)
            start = offset
        elif fence.closes(line):
            found.append((start, offset + len(line)))
            fence = None
        offset += len(line) + 1
    if fence is not None:
        found.append((start, len(text)))
    return found


def sanitizer_code(text: str) -> list[str]:
    return [segment.text for segment in split_fences(text) if segment.code]


def renderer_code(text: str) -> list[tuple[str, str]]:
    """(language, body) of each top-level code block the renderers draw."""
    return [(b.language, b.body) for b in parse_blocks(text) if isinstance(b, CodeBlock)]


def expected_render(text: str, block: FencedBlock) -> tuple[str, str]:
    """The (language, body) a block's content lines give: "\\r\\n" read as "\\n", and up to
    the opener's indentation of leading spaces taken off each line."""
    content_end = block.close_start if block.close_start is not None else len(text)
    if block.open_end >= content_end:
        return block.fence.language, ""
    content = text[block.open_end + 1 : content_end].replace("\r\n", "\n")
    if block.closed:
        content = content.removesuffix("\n")
    width = len(block.fence.indent)
    lines = [line[min(width, len(line) - len(line.lstrip(" "))) :] for line in content.split("\n")]
    return block.fence.language, "\n".join(lines)


def line_kinds(text: str) -> list[str]:
    """For each "\\n"-line: "open", "close", "code" (inside a block) or "prose"."""
    starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    kinds = ["prose"] * len(starts)
    for block in fenced_blocks(text):
        first = bisect_right(starts, block.start) - 1
        last = bisect_right(starts, block.close_start) - 1 if block.closed else len(starts)
        kinds[first] = "open"
        for index in range(first + 1, min(last, len(starts))):
            kinds[index] = "code"
        if block.closed:
            kinds[last] = "close"
    return kinds


def repairable(text: str, block: FencedBlock, limit: int) -> bool:
    """The chunker's promise holds for this block: its opening and closing lines, repeated at
    a cut, need at most half the limit (otherwise it is cut like prose, as documented)."""
    opener = text[block.start : block.open_end].rstrip()
    return len(opener) + len(block.fence.indent) + block.fence.length + 2 <= limit // 2


def chunk_disagreements(text: str, limit: int) -> list[str]:
    """Whole, non-blank lines of the input whose kind in the chunk that holds them (read on
    its own, with the fence lines added at the cuts) differs from their kind in `text`."""
    starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    whole = line_kinds(text)
    found: list[str] = []
    position = 0
    for chunk in split_markdown_chunks(text, limit):
        offset = text.index(chunk.body, position)
        position = offset + len(chunk.body)
        kinds = line_kinds(chunk.text)[1 if chunk.reopen else 0 :]
        at = offset
        for kind, line in zip(kinds, chunk.body.split("\n"), strict=False):
            index = bisect_right(starts, at) - 1
            line_end = text.find("\n", starts[index])
            original = text[starts[index] : len(text) if line_end < 0 else line_end]
            is_whole = at == starts[index] and original.rstrip() == line.rstrip()
            if is_whole and line.strip() and kind != whole[index]:
                found.append(
                    f"line {index} {original!r}: {whole[index]} in the text, {kind} in {chunk}"
                )
            at += len(line) + 1
    return found


# -- the readers agree --


@settings(max_examples=400)
@given(MARKDOWNISH)
def test_the_text_scan_finds_what_a_line_by_line_reading_finds(text: str) -> None:
    assert [(b.start, b.end) for b in fenced_blocks(text)] == line_by_line(text)


@settings(max_examples=400)
@given(MARKDOWNISH)
def test_the_sanitizer_leaves_alone_exactly_the_fenced_code(text: str) -> None:
    assert sanitizer_code(text) == [text[b.start : b.end] for b in fenced_blocks(text)]
    assert "\n".join(segment.text for segment in split_fences(text)) == text


@settings(max_examples=400)
@given(MARKDOWNISH)
def test_the_renderers_draw_exactly_the_fenced_code(text: str) -> None:
    assert renderer_code(text) == [expected_render(text, b) for b in fenced_blocks(text)]


@settings(max_examples=300)
@given(MARKDOWNISH, st.integers(min_value=60, max_value=200))
def test_each_chunk_shows_as_code_what_the_whole_text_shows_as_code(text: str, limit: int) -> None:
    assume(all(repairable(text, block, limit) for block in fenced_blocks(text)))
    assert chunk_disagreements(text, limit) == []


# -- where the three readers used to disagree --

CASES = [
    # (text, what is code: the sanitizer's code segments)
    pytest.param("```\ncode\n```\u00a0\nafter", ["```\ncode\n```\u00a0"], id="nbsp-after-closer"),
    pytest.param("```\ncode\n\u00a0```\nafter", ["```\ncode\n\u00a0```"], id="nbsp-before-closer"),
    pytest.param("```\ncode\n```\x0b\nafter", ["```\ncode\n```\x0b"], id="vtab-after-closer"),
    pytest.param("```\ncode\n``` \t\nafter", ["```\ncode\n``` \t"], id="spaces-after-closer"),
    pytest.param("x\r```\ny\n```\nz", ["```\nz"], id="lone-cr-is-no-line-break"),
    pytest.param("```py\r\ncode\r\n```\r\nafter", ["```py\r\ncode\r\n```\r"], id="crlf"),
    pytest.param(
        "a|b\n-|-\n```x|y\ncode\n```\nafter", ["```x|y\ncode\n```"], id="fence-ends-a-table"
    ),
    pytest.param(
        "1. step\n\n    ```sh\n    ls\n    ```\n", ["    ```sh\n    ls\n    ```"], id="indented-4"
    ),
    pytest.param("```a```\nnot code", [], id="backtick-info-with-backtick"),
    pytest.param("~~~\n```\n~~~~\nafter", ["~~~\n```\n~~~~"], id="longer-closer"),
    pytest.param("````\n```\nstill code", ["````\n```\nstill code"], id="shorter-closer"),
    pytest.param("> ```\n> quoted\n> ```\nafter", [], id="quoted-fence-is-not-top-level"),
]


@pytest.mark.parametrize(("text", "code"), CASES)
def test_the_readers_agree_where_they_used_to_differ(text: str, code: list[str]) -> None:
    blocks = fenced_blocks(text)
    assert [text[b.start : b.end] for b in blocks] == code
    assert sanitizer_code(text) == code
    assert renderer_code(text) == [expected_render(text, b) for b in blocks]
    for limit in (30, 45):
        assert chunk_disagreements(text, limit) == []


def test_a_closer_followed_by_a_no_break_space_ends_the_code_for_every_reader() -> None:
    """The sanitizer used to read on as code here, leaving a leaked tag in what the
    renderers drew as prose; now it cleans what they draw as prose."""
    text = "```\nx = 1\n```\u00a0\n<think>hidden</think>shown"
    assert renderer_code(text) == [("", "x = 1")]
    assert sanitizer_code(text) == ["```\nx = 1\n```\u00a0"]
    assert sanitize_output(text) == "```\nx = 1\n```\u00a0\nshown"


def test_a_fence_indented_by_a_no_break_space_opens_nothing_but_may_close() -> None:
    assert fenced_blocks("\u00a0```\ncode") == []
    assert [b.end for b in fenced_blocks("```\ncode\n\u00a0```\nafter")] == [13]
