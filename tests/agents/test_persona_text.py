"""Template comments for owners are left out of the prompt, with what they leave empty."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.persona_text import clean_persona

BOOTSTRAP = Path(__file__).resolve().parents[2] / "bootstrap"


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("Plain text.\n", "Plain text."),
        ("Keep <!-- this --> line", "Keep  line"),
        ("- **Name:** <!-- what to call you -->\n- **Name:** Ada", "- **Name:** Ada"),
        ("# Title\n\n## Empty\n<!-- fill in -->\n\n## Full\nyes", "# Title\n\n## Full\nyes"),
        ("# Only\n<!-- a\nmulti-line\ncomment -->\n", ""),
        ("text <!-- never closed", "text"),
        ("a\n<!-- x -->\n\n\n<!-- y -->\nb", "a\n\nb"),
        ("x <!<!-- a comment -->-- y -->", "x"),  # no comment is left behind by another
    ],
)
def test_comments_and_what_they_leave_empty_are_removed(text: str, cleaned: str) -> None:
    assert clean_persona(text) == cleaned


def test_the_shipped_templates_send_no_comment_and_empty_ones_send_nothing() -> None:
    for path in BOOTSTRAP.glob("*.md"):
        assert "<!--" not in clean_persona(path.read_text())
    for empty in ("USER.md", "MEMORY.md", "HEARTBEAT.md"):
        assert clean_persona((BOOTSTRAP / empty).read_text()) == ""


_PIECES = st.sampled_from(["<!--", "-->", "\n", "# H\n", "## S\n", "- **K:** ", "word", " "])


@given(st.lists(st.one_of(_PIECES, st.text(max_size=5)), max_size=30).map("".join))
def test_cleaning_is_stable_and_leaves_no_comment_open(text: str) -> None:
    once = clean_persona(text)
    assert clean_persona(once) == once  # the same bytes every time: a stable prefix
    assert "<!--" not in once
