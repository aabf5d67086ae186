"""The providers' per-call cost: the request bodies Perch encodes itself (instead of the
SDKs' Python passes over the whole request) are the JSON the SDKs would send, stable parts
reused only while they are the same objects; the Anthropic SDK's stream accumulator finds its
generic message class cached instead of building it again after each garbage collection."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agents.model import Message, ModelRequest
from agents.providers.anthropic import AnthropicClient
from agents.providers.anthropic_body import BodyEncoder
from agents.providers.openai import OpenAIClient
from agents.providers.openai_body import ChatBodyEncoder
from agents.providers.openai_wire import to_chat_messages, to_chat_tools
from agents.surrogates import fix_data

PERSONA = "You are Perch. " * 100  # long enough to be kept by identity
TOOLS: list[dict[str, Any]] = [
    {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}},
]


def expected(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": True,
        "messages": request.messages,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = request.tools
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def request(**kwargs: Any) -> ModelRequest:
    system = [
        {"type": "text", "text": PERSONA, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Now: Tuesday"},
    ]
    messages: list[Message] = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    fields: dict[str, Any] = {
        "model": "claude-test",
        "system": system,
        "messages": messages,
        "tools": TOOLS,
        "max_tokens": 100,
        **kwargs,
    }
    return ModelRequest(**fields)


def test_the_body_is_the_request_as_json() -> None:
    encoder = BodyEncoder()
    for req in (
        request(),
        request(temperature=0.5),
        request(system=[], tools=[]),
        request(system=[{"type": "text", "text": PERSONA}]),  # a long block without extras
    ):
        assert json.loads(encoder.encode(req)) == expected(req)


def test_stable_parts_are_reused_only_while_they_are_the_same_objects() -> None:
    encoder = BodyEncoder()
    first = encoder.encode(request())
    assert encoder.encode(request()) == first
    tools = [*TOOLS, {"name": "write", "description": "Write", "input_schema": {}}]
    persona = PERSONA + "More."
    changed = request(
        tools=tools, system=[{"type": "text", "text": persona, "cache_control": {"x": 1}}]
    )
    body = json.loads(encoder.encode(changed))
    assert [t["name"] for t in body["tools"]] == ["read", "write"]
    assert body["system"] == [{"type": "text", "text": persona, "cache_control": {"x": 1}}]


TEXT = st.text(st.characters(exclude_categories=()), max_size=30)  # surrogates included


@given(st.lists(TEXT, min_size=1, max_size=4), TEXT)
def test_any_text_encodes_and_lone_surrogates_become_replacement_characters(
    texts: list[str], system_text: str
) -> None:
    messages: list[Message] = [
        {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}
    ]
    req = request(messages=messages, system=[{"type": "text", "text": system_text}])
    body = json.loads(BodyEncoder().encode(req))
    # A lone surrogate (no API takes one) becomes U+FFFD; NUL is sent, as JSON escapes it.
    assert body["messages"] == fix_data(messages, keep_nul=True)
    assert body["system"] == fix_data(req.system, keep_nul=True)


async def test_the_sdk_stream_message_class_survives_garbage_collection() -> None:
    from anthropic.lib.streaming import AsyncMessageStream
    from anthropic.types import ParsedMessage

    client = AnthropicClient("sk-test", "http://127.0.0.1:9")
    await client.warm()  # loads the SDK as the daemon does after READY
    (format_t,) = AsyncMessageStream.__parameters__
    generic: Any = ParsedMessage
    built = weakref.ref(generic[format_t])  # what the SDK builds for each streamed response
    gc.collect()
    assert built() is not None and generic[format_t] is built()
    await client.aclose()


def test_the_chat_completions_body_is_the_converted_request() -> None:
    encoder = ChatBodyEncoder()
    for req in (request(), request(temperature=0.25), request(tools=[])):
        for tool_images in (True, False):
            body = json.loads(encoder.encode(req, tool_images))
            want: dict[str, Any] = {
                "model": req.model,
                "max_tokens": req.max_tokens,
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": to_chat_messages(req.system, req.messages, tool_images=tool_images),
            }
            if req.tools:
                want["tools"] = to_chat_tools(req.tools)
            if req.temperature is not None:
                want["temperature"] = req.temperature
            assert body == want
    renamed = [{**TOOLS[0], "name": "other"}]  # a new tool list is converted again
    assert json.loads(encoder.encode(request(tools=renamed)))["tools"][0]["function"]["name"] == (
        "other"
    )


async def test_both_providers_send_their_bodies_as_json() -> None:
    from tests.fakes.anthropic import FakeAnthropic, Reply
    from tests.fakes.openai import FakeOpenAI

    async with FakeOpenAI() as server:
        client = OpenAIClient("sk-test", server.base_url)
        await client.complete(request())
        await client.aclose()
        assert server.headers[-1].get("Content-Type") == "application/json"
        assert server.requests[-1]["tools"][0]["function"]["name"] == "read"
    async with FakeAnthropic() as fake:
        fake.queue(Reply.text("ok"))
        anthropic = AnthropicClient("sk-test", fake.base_url)
        answer = await anthropic.complete(request())
        await anthropic.aclose()
        assert answer.content == [{"type": "text", "text": "ok"}]
        assert fake.requests[-1]["tools"] == TOOLS and fake.requests[-1]["stream"] is True
        assert fake.headers[-1].get("Content-Type") == "application/json"
