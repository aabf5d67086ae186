"""What a search term is (`bot/store/search_text.py`): a table of cases, and properties that
hold for any text (the model and every chat write what gets indexed and asked)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.store.search_text import indexed_tokens, scope_prefix, snippet, terms_of

TERM = re.compile(r"[^\W_]{2,75}")


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("When are Ada's BIRTHDAYS?", ["ada", "birthday"]),
        ("Café crème brûlée", ["cafe", "creme", "brule"]),
        ("don't forget_it, ok?", ["forget"]),  # stop words, one letter, `_` cuts
        ("the and of is a I", []),
        ("12 May 2026", ["12", "may", "2026"]),
        ("running runs ran", ["run", "run", "ran"]),
        ("东京 tower", ["东京", "tower"]),  # no spaces between words: one run, as FTS5 does
        ("x" * 65 + " ok fine", ["fine"]),  # a hash is no word
    ],
)
def test_terms(text: str, terms: list[str]) -> None:
    assert terms_of(text) == terms


@given(st.text(max_size=300))
def test_any_text_gives_plain_terms(text: str) -> None:
    for term in terms_of(text):
        assert TERM.fullmatch(term) and term == term.casefold()


@given(st.text(max_size=400), st.integers(min_value=20, max_value=300))
def test_a_snippet_keeps_within_its_limit(text: str, limit: int) -> None:
    cut = snippet(text, set(terms_of(text)[:1]), limit)
    assert len(cut) <= limit
    assert cut.strip("…") in " ".join(text.split())


def test_a_snippet_shows_where_the_match_is() -> None:
    text = "filler " * 100 + "the boat is moored at pier seven " + "filler " * 100
    cut = snippet(text, {"pier"}, 80)
    assert "pier seven" in cut and cut.startswith("…") and cut.endswith("…")


def test_scoped_tokens_match_postgresql_md5() -> None:
    assert scope_prefix("owner") == "s72122ce96b"  # md5('owner') = 72122ce96bfec66e2396d2e25225d70a
    assert indexed_tokens(["boat", "pier"], "owner") == "boat pier s72122ce96bboat s72122ce96bpier"
