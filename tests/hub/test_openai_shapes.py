"""The Chat Completions request as Perch reads it, and the shapes it answers with."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.model import Usage
from bot.web.openai_shapes import (
    LEFT_OUT,
    ApiError,
    chunk,
    completion,
    error_body,
    parse_request,
)


def test_a_conversation_becomes_history_and_the_last_user_message() -> None:
    asked = parse_request(
        {
            "model": "work",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": "two"},
                {"role": "tool", "content": "ignored", "tool_call_id": "x"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "three"}, {"type": "image_url"}],
                },
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "user": " ann ",
        }
    )
    assert asked.model == "work" and asked.stream and asked.include_usage and asked.user == "ann"
    assert [m["role"] for m in asked.earlier] == ["user", "assistant"]
    assert asked.text == f"[The caller's instructions]:\nBe brief.\n\nthree\n{LEFT_OUT}"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ([], "JSON object"),
        ({"messages": [{"role": "user", "content": "x"}]}, "model is required"),
        ({"model": "m"}, "non-empty list"),
        ({"model": "m", "messages": ["x"]}, "messages[0] must be an object"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "assistant", "content": "x"}]}, "last message"),
        ({"model": "m", "messages": [{"role": "user", "content": "  "}]}, "last message"),
    ],
)
def test_bad_requests_are_400_naming_the_field(data: Any, words: str) -> None:
    with pytest.raises(ApiError) as error:
        parse_request(data)
    assert error.value.status == 400 and words in error.value.message


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
def test_any_json_is_read_or_refused_with_400(data: Any) -> None:
    try:
        parse_request(data)
    except ApiError as error:
        assert error.status == 400


def test_answers_carry_usage_and_errors_have_openais_shape() -> None:
    usage = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=20)
    whole = completion("r1", "main", "hi", usage, 7)
    assert whole["usage"] == {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}
    assert whole["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    last = chunk("r1", "main", 7, None, usage=usage)
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 35
    body = error_body(ApiError(404, "no such model", code="model_not_found"))
    assert body == {
        "error": {
            "message": "no such model",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
