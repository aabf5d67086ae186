"""Our blocks <-> the Chat Completions wire format, built per request (nothing is stored).

A session's history is kept in one shape (`agents.model` blocks), so it can move between
kinds mid-conversation: `to_chat_messages` turns an assistant's `tool_use` blocks into
`tool_calls`, each `tool_result` into a `role: tool` message right after them (before the
user's own text), images into `image_url` data URLs, and drops what Chat Completions cannot
carry (thinking blocks, cache breakpoints). A `role: tool` message carries text only, so the
images of a tool result go in a user message after the tool messages (`tool_images=False`:
a note instead, for models that take no images). `ToolCallAccumulator` rebuilds tool calls whose
arguments arrive in pieces, several per response told apart by `index`.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from agents.model import (
    Block,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    text_block,
    tool_use_block,
)

log = logging.getLogger(__name__)

# The Messages API accepts only these in a tool id; ids are made safe when they arrive, so a
# session can move to Anthropic later (the same id then goes back to this server unchanged).
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")

FINISH_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def to_chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def _image_part(block: Block | TextBlock | ImageBlock) -> dict[str, Any] | None:
    if block["type"] != "image":
        return None
    source = block["source"]
    url = f"data:{source['media_type']};base64,{source['data']}"
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(
    block: ToolResultBlock, tool_images: bool, parts: list[dict[str, Any]]
) -> dict[str, Any]:
    """The `role: tool` message of a tool result. A tool message carries text only, so its
    images are added to `parts`, the user message that follows the tool messages."""
    content = block.get("content", "")
    items = content if isinstance(content, list) else [text_block(content)]
    texts: list[str] = []
    images: list[dict[str, Any]] = []
    for item in items:
        if item["type"] == "text":
            texts.append(item["text"])
        elif (image := _image_part(item)) is not None:
            if tool_images:
                images.append(image)
                texts.append("[image]")
            else:
                texts.append("[image: not shown, this model takes no images]")
    if images:
        call = block["tool_use_id"]
        parts.append({"type": "text", "text": f"[images from tool call {call}]"})
        parts.extend(images)
    result = "\n".join(texts) or "(empty)"
    if block.get("is_error") and not result.startswith("Error"):
        result = f"Error: {result}"  # Chat Completions has no is_error flag
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": result}


def _user_messages(content: list[Block], tool_images: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    has_image = False
    for block in content:
        if block["type"] == "tool_result":
            shown = len(parts)
            out.append(_tool_result(block, tool_images, parts))
            has_image = has_image or len(parts) > shown
        elif block["type"] == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif (image := _image_part(block)) is not None:
            has_image = True
            parts.append(image)
    if parts:
        if has_image:
            out.append({"role": "user", "content": parts})
        else:  # plain text as a string: what every server understands
            out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
    return out


def _assistant_message(content: list[Block]) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            calls.append(
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {
                        "name": block["name"],
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
    if not texts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message


def to_chat_messages(
    system: list[TextBlock], messages: list[Message], *, tool_images: bool = True
) -> list[dict[str, Any]]:
    """The request's `messages` for Chat Completions; `tool_images=False` leaves out the
    images of tool results (a note says so)."""
    out: list[dict[str, Any]] = []
    prompt = "\n\n".join(b["text"] for b in system if b["text"])
    if prompt:
        out.append({"role": "system", "content": prompt})
    for message in messages:
        if message["role"] == "assistant":
            translated = _assistant_message(message["content"])
            if translated is not None:
                out.append(translated)
        else:
            out.extend(_user_messages(message["content"], tool_images))
    return out


class ToolCallAccumulator:
    """Tool calls streamed as `delta.tool_calls[i]` pieces, rebuilt in `index` order."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, piece: Any) -> None:
        index = piece.index if piece.index is not None else len(self._calls)
        call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
        if piece.id:
            call["id"] = piece.id
        function = piece.function
        if function is not None:
            if function.name:
                call["name"] += function.name
            if function.arguments:
                call["arguments"].append(function.arguments)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def blocks(self, id_prefix: str) -> list[Block]:
        out: list[Block] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            raw = "".join(call["arguments"]).strip()
            try:
                arguments = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                log.warning("tool call %s sent arguments that are not JSON", call["name"])
                arguments = {"_invalid_arguments": raw[:2000]}
            if not isinstance(arguments, dict):
                arguments = {"_invalid_arguments": raw[:2000]}
            tool_id = _UNSAFE_ID.sub("_", call["id"])[:64] or f"{id_prefix}{index}"
            out.append(tool_use_block(tool_id, call["name"], arguments))
        return out
