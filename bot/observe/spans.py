"""What goes into a span besides timing: GenAI semantic-convention names and message content.

Content (message text, tool arguments and results) is recorded only with `tracing.content:
true`, in the GenAI conventions' JSON shape (`gen_ai.input.messages`: a list of `{role,
parts}`, parts `text`, `tool_call`, `tool_call_response`; images as a `blob` without data;
reasoning left out). Input messages are taken from the newest backwards while they fit in
`MAX_CONTENT_CHARS`, so the JSON stays whole and shows the latest turn; one text part
longer than `MAX_PART_CHARS` is cut with a marker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from agents.model import Block, Message, tool_result_text

# gen_ai.* (OpenTelemetry GenAI semantic conventions) and Perch's own attribute names.
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION = "gen_ai.conversation.id"
ERROR_TYPE = "error.type"

MAX_CONTENT_CHARS = 12_000
MAX_PART_CHARS = 4_000
CUT = "… [cut]"


def cut(text: str, limit: int = MAX_PART_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - len(CUT)] + CUT


def _part(block: Block) -> dict[str, Any] | None:
    if block["type"] == "text":
        return {"type": "text", "content": cut(block["text"])}
    if block["type"] == "image":
        return {"type": "blob", "modality": "image", "mime_type": block["source"]["media_type"]}
    if block["type"] == "tool_use":
        return {
            "type": "tool_call",
            "id": block["id"],
            "name": block["name"],
            "arguments": block["input"],
        }
    if block["type"] == "tool_result":
        return {
            "type": "tool_call_response",
            "id": block["tool_use_id"],
            "response": cut(tool_result_text(block)),
        }
    return None  # thinking: never recorded


def _message(role: str, blocks: Iterable[Block]) -> dict[str, Any]:
    return {"role": role, "parts": [p for b in blocks if (p := _part(b)) is not None]}


def input_messages(messages: Sequence[Message]) -> str:
    """The request's messages as GenAI JSON: the newest that fit in `MAX_CONTENT_CHARS`."""
    kept: list[str] = []
    size = 2
    for message in reversed(messages):
        text = json.dumps(_message(message["role"], message["content"]), ensure_ascii=False)
        if kept and size + len(text) + 1 > MAX_CONTENT_CHARS:
            break
        kept.append(text)
        size += len(text) + 1
    return "[" + ",".join(reversed(kept)) + "]"


def output_messages(content: Sequence[Block], stop_reason: str) -> str:
    message = _message("assistant", content)
    message["finish_reason"] = stop_reason
    return json.dumps([message], ensure_ascii=False)


def arguments_json(arguments: dict[str, Any]) -> str:
    return cut(json.dumps(arguments, ensure_ascii=False, default=str), MAX_CONTENT_CHARS)
