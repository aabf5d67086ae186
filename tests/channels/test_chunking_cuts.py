"""split_markdown under pressure (issue 12): linear time on any text, and no chunk leaves a
code fence open on any cut path: inside a fence's opening line, its closing line, or a line
that looks like a closer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.chunking import split_markdown_chunks
from tests.channels.test_chunking import (
    assert_well_formed,
    fence_openers,
    open_fence_after,
    repairable,
)


@pytest.mark.parametrize(
    "text",
    [
        "a" + " ~~~" * 250_000,
        "a" + " ```" * 250_000,
        "x" * 1_000_000,
        "a" + " " * 1_000_000 + "b",
        "a" + " \n" * 500_000 + "b",
        "```\n" * 250_000,
        "```\nx\n" * 170_000,
        "word " * 200_000,
        "`" * 1_000_000,
        "~~~ " + "a" * 1_000_000,
        ("para " * 50 + "\n\n```py\n" + "x = 1\n" * 40 + "```\n\n") * 1_500,
    ],
)
def test_a_megabyte_of_pathological_text_splits_into_well_formed_chunks(text: str) -> None:
    chunks = split_markdown_chunks(text, 4000)
    assert_well_formed(text, chunks, 4000)
    if all(repairable(opener, 4000) for opener in fence_openers(text)):
        for chunk in chunks:
            assert open_fence_after(chunk.text) is None


def _fence_heavy_line() -> st.SearchStrategy[str]:
    marker = st.sampled_from(["```", "````", "~~~", "~~~~", "``", "~~"])
    word = st.sampled_from(["a", "bb", "py", "x`y", " ", "  ", "\t"])
    return st.builds(
        lambda indent, m, rest: indent + m + rest,
        st.sampled_from(["", " ", "   ", "    ", "\t"]),
        marker,
        st.lists(st.one_of(word, marker), max_size=8).map("".join),
    )


fence_heavy = st.lists(
    st.one_of(_fence_heavy_line(), st.text(alphabet="ab `~\t", max_size=30)), max_size=30
).map("\n".join)


@settings(max_examples=500)
@given(text=fence_heavy, limit=st.integers(min_value=12, max_value=120))
def test_every_chunk_closes_its_fences_on_every_cut_path(text: str, limit: int) -> None:
    chunks = split_markdown_chunks(text, limit)
    assert_well_formed(text, chunks, limit)
    if all(repairable(opener, limit) for opener in fence_openers(text)):
        for chunk in chunks:
            assert open_fence_after(chunk.text) is None, (chunk, [c.text for c in chunks])


@settings(max_examples=200)
@given(
    info=st.text(alphabet="ab ~", min_size=20, max_size=200),
    body=st.lists(st.text(alphabet="ab ~`", max_size=60), max_size=6).map("\n".join),
    closer=st.sampled_from(["~~~", "~~~~~~~~~~~~~~~~~~~~", "    ~~~", "~~~   "]),
    limit=st.integers(min_value=30, max_value=90),
)
def test_cuts_inside_a_long_opening_or_closing_line_stay_balanced(
    info: str, body: str, closer: str, limit: int
) -> None:
    text = f"Intro.\n~~~{info}\n{body}\n{closer}\nAfter ~~~ the end."
    chunks = split_markdown_chunks(text, limit)
    assert_well_formed(text, chunks, limit)
    if not all(repairable(opener, limit) for opener in fence_openers(text)):
        return  # a marker too long to repeat within the limit is cut like prose (documented)
    for chunk in chunks:
        assert open_fence_after(chunk.text) is None, (chunk, [c.text for c in chunks])
