"""Run the same model-facing tests against both provider kinds.

`OpenAIView` wraps `FakeOpenAI` so tests written against `FakeAnthropic` read the same:
`requests` shows each Chat Completions body translated back into the Messages API shape
(system blocks, user/assistant content blocks, `role: tool` messages as `tool_result` blocks,
`tool_calls` as `tool_use` blocks, tools by `name`; the time a turn's message opens with as a
block of its own, as Perch makes it), and `default` receives that view too. Every other
attribute is the fake's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.openai import FakeOpenAI
from tests.turn_text import TIME_STAMP, said

KINDS = ("anthropic", "openai")
OPENAI_MODEL = "local/gpt-test"


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        stamp = TIME_STAMP.match(content)
        if stamp is not None and said(content):
            return [{"type": "text", "text": stamp.group()}, *_blocks(said(content))]
        return [{"type": "text", "text": content}] if content else []
    out: list[dict[str, Any]] = []
    for part in content or []:
        if part.get("type") == "text":
            out.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            out.append({"type": "image", "url": part["image_url"]["url"]})
    return out


def anthropic_view(body: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions request body in the Messages API's shape."""
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})

    for message in body.get("messages", []):
        role = message["role"]
        if role == "system":
            system.append({"type": "text", "text": message["content"]})
        elif role == "tool":
            content = message["content"]
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            block["content"] = content
            if content.startswith("Error"):
                block["is_error"] = True
            add("user", [block])
        elif role == "assistant":
            blocks = _blocks(message.get("content"))
            for call in message.get("tool_calls") or []:
                function = call["function"]
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": function["name"],
                        "input": json.loads(function["arguments"] or "{}"),
                    }
                )
            add("assistant", blocks)
        else:
            add("user", _blocks(message.get("content")))
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
        for t in body.get("tools") or []
    ]
    view = {**body, "system": system, "messages": messages}
    if tools:
        view["tools"] = tools
    return view


class OpenAIView:
    """`FakeOpenAI` seen through `anthropic_view` (see the module docstring)."""

    kind = "openai"
    model = OPENAI_MODEL

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake

    @property
    def requests(self) -> list[dict[str, Any]]:
        return [anthropic_view(b) for b in self.fake.requests]

    @property
    def default(self) -> Callable[[dict[str, Any]], Reply]:
        return self.fake.default

    @default.setter
    def default(self, answer: Callable[[dict[str, Any]], Reply]) -> None:
        self.fake.default = lambda body: answer(anthropic_view(body))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fake, name)


def provider_settings(fake: Any) -> tuple[str, dict[str, Any]]:
    """(agent.model, providers section) that point a daemon at `fake`."""
    if isinstance(fake, OpenAIView | FakeOpenAI):
        return OPENAI_MODEL, {
            "anthropic": {"api_key": "unused-key"},
            "local": {"kind": "openai", "api_key": "test-key", "base_url": fake.base_url},
        }
    assert isinstance(fake, FakeAnthropic)
    return "claude-sonnet-5-5", {"anthropic": {"api_key": "test-key", "base_url": fake.base_url}}
