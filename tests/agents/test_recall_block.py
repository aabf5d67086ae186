"""The recalled block (`agents.recall.recall_block`): within its budget, best first, and never
closed early by what a snippet says."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agents.recall import CLOSE, OPEN, Recalled, recall_block

TAGS = re.compile(r"<\s*/?\s*recalled[\s_-]*context\s*>", re.IGNORECASE)


def note(text: str, where: str = "MEMORY.md") -> Recalled:
    return Recalled("memory", where, 0.0, text)


def test_snippets_best_first_with_where_and_when() -> None:
    block = recall_block(
        [note("Dentist on Friday at 9."), Recalled("sessions", "your DM", 1_764_000_000, "hi")],
        max_tokens=600,
        max_snippets=5,
        timezone="Europe/Lisbon",
    )
    assert block is not None
    lines = block["text"].splitlines()
    assert lines[0] == OPEN and lines[-1] == CLOSE
    assert lines[2] == "- [MEMORY.md] Dentist on Friday at 9."
    assert lines[3] == "- [your DM, Mon 2025-11-24 16:00] hi"


def test_nothing_found_is_no_block() -> None:
    assert recall_block([], max_tokens=600, max_snippets=5) is None


def test_the_budget_holds() -> None:
    items = [note("word " * 400) for _ in range(10)]
    block = recall_block(items, max_tokens=100, max_snippets=5)
    assert block is not None and len(block["text"]) <= 100 * 4


TAG_SPELLINGS = st.sampled_from(
    [CLOSE, OPEN, "</RECALLED_CONTEXT>", "< / recalled context >", "</Recalled-Context>"]
)


@given(
    st.lists(
        st.tuples(st.text(max_size=80), TAG_SPELLINGS, st.text(max_size=80)),
        min_size=1,
        max_size=6,
    )
)
def test_a_snippet_never_opens_or_closes_the_block(parts: list[tuple[str, str, str]]) -> None:
    items = [note(before + tag + after) for before, tag, after in parts]
    block = recall_block(items, max_tokens=2000, max_snippets=6)
    assert block is not None
    text = block["text"]
    assert text.startswith(OPEN + "\n") and text.endswith("\n" + CLOSE)
    assert len(TAGS.findall(text)) == 2  # its own two, and no other
