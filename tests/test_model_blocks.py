"""Content blocks as the store keeps them: JSON in, the same blocks out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import Block, dumps_content, loads_content, text_of, tool_result_text

texts = st.text(max_size=50)
blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(
        lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": {"a": a}},
        texts,
        texts,
        texts,
    ),
    st.builds(
        lambda i, c, e: {"type": "tool_result", "tool_use_id": i, "content": c, "is_error": e},
        texts,
        texts,
        st.booleans(),
    ),
)


@given(st.lists(blocks, max_size=6))
def test_content_round_trips_through_the_store_format(content: list[Any]) -> None:
    assert loads_content(dumps_content(content)) == content


@given(
    st.recursive(
        st.none() | st.integers() | texts,
        lambda kids: st.lists(kids) | st.dictionaries(texts, kids),
    )
)
def test_any_stored_json_reads_as_a_list_of_objects_or_a_clear_error(data: Any) -> None:
    try:
        content = loads_content(json.dumps(data))
    except ValueError as exc:
        assert "not a list" in str(exc)
    else:
        assert isinstance(content, list) and all(isinstance(b, dict) for b in content)


def test_readers() -> None:
    content: list[Block] = [
        {"type": "text", "text": "a"},
        {"type": "tool_use", "id": "t", "name": "n", "input": {}},
        {"type": "text", "text": "b"},
    ]
    assert text_of(content) == "ab"
    assert loads_content('"plain"') == [{"type": "text", "text": "plain"}]
    result = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "text", "text": "x"}, {"type": "image", "source": {}}],
    }
    assert tool_result_text(result) == "x\n[image]"  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a list"):
        loads_content("{}")
