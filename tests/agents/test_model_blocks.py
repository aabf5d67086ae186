"""Content blocks as the store keeps them: JSON in, the same blocks out."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import (
    Block,
    dumps_content,
    image_block,
    loads_content,
    text_block,
    text_of,
    tool_result_block,
    tool_result_text,
    tool_use_block,
)

REPO = Path(__file__).resolve().parents[2]

texts = st.text(max_size=50)
blocks = st.one_of(
    st.builds(text_block, texts, cached=st.booleans()),
    st.builds(lambda i, n, a: tool_use_block(i, n, {"a": a}), texts, texts, texts),
    st.builds(tool_result_block, texts, texts, st.booleans()),
    st.builds(image_block, st.sampled_from(["image/png", "image/jpeg"]), texts),
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


def test_the_constructors_build_the_messages_api_shapes() -> None:
    assert text_block("hi") == {"type": "text", "text": "hi"}
    assert text_block("stable", cached=True) == {
        "type": "text",
        "text": "stable",
        "cache_control": {"type": "ephemeral"},
    }
    assert image_block("image/png", "iVBORw0K") == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
    }
    assert tool_use_block("toolu_1", "read_file", {"path": "a.txt"}) == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_file",
        "input": {"path": "a.txt"},
    }
    assert tool_result_block("toolu_1", "boom", is_error=True) == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": "boom",
        "is_error": True,
    }
    assert "is_error" not in tool_result_block("toolu_1", "fine")


# A block literal: `{"type": "text"` and the like, where a constructor should be called.
_BLOCK_LITERAL = re.compile(
    r"""\{\s*["']type["']\s*:\s*["'](text|image|tool_use|tool_result)["']"""
)
# Chat Completions message parts look like text blocks but are that API's wire format; so are
# the OpenTelemetry GenAI message parts a span records (`{"type": "text", "content": ...}`),
# and the WhatsApp Cloud API's message bodies (`{"type": "text", "text": {"body": ...}}`).
_WIRE_FORMATS = {
    "agents/model.py",
    "agents/providers/openai_wire.py",
    "bot/observe/spans.py",
    "channels/whatsapp/delivery.py",
}


def test_blocks_are_built_only_by_the_constructors_in_agents_model() -> None:
    found = []
    for room in ("agents", "bot", "channels"):
        for path in sorted((REPO / room).rglob("*.py")):
            name = str(path.relative_to(REPO))
            text = path.read_text()
            if name not in _WIRE_FORMATS:
                found += [
                    f"{name}:{text.count(chr(10), 0, m.start()) + 1}"
                    for m in _BLOCK_LITERAL.finditer(text)
                ]
    assert found == []
