"""The OpenAI Chat Completions wire shapes, in and out: pure, table- and property-tested.

In: `parse_request(data)` reads a `POST /v1/chat/completions` body into a `ChatRequest`
(`model`, the conversation, `stream`, `stream_options.include_usage`, `user`), or raises
`ApiError` (400) saying which field is wrong. A message's content is a string or a list of
text parts (`type` text) (other parts are left out with a note). `system` and `developer`
messages become a note at the head of the last user message (the agent keeps its own
persona); `tool` messages are left out (the agent's tools run in Perch). The last message
must be the user's.
Out: `completion`, `chunk`, `usage_of`, `model_list` and `error_body` build the answers
in the shapes the official clients read (errors: `{"error": {message, type, param, code}}`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.model import Message, Usage, text_block

LEFT_OUT = "[a part of this message that is not text was left out]"


class ApiError(Exception):
    """An answer in OpenAI's error shape: `status`, `message`, `kind` (its `type`), `code`."""

    def __init__(
        self, status: int, message: str, *, kind: str = "invalid_request_error", code: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code or None
        self.param: str | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    model: str
    earlier: list[Message]  # the conversation before the last user message
    text: str  # the last user message (with the caller's instructions, if any, first)
    stream: bool = False
    include_usage: bool = False
    user: str = ""
    notes: list[str] = field(default_factory=list)


def _text_of(content: object, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}.content must be a string or a list of parts")
    pieces: list[str] = []
    for n, part in enumerate(content):
        if not isinstance(part, dict):
            raise ApiError(400, f"{where}.content[{n}] must be an object")
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        else:
            pieces.append(LEFT_OUT)
    return "\n".join(pieces)


def parse_request(data: object) -> ChatRequest:
    """The request `data` asks for (see the module's docstring)."""
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "model is required: the id of an agent (GET /v1/models)")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    instructions: list[str] = []
    earlier: list[Message] = []
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict):
            raise ApiError(400, f"{where} must be an object")
        role = message.get("role")
        text = _text_of(message.get("content"), where)
        if role in ("system", "developer"):
            instructions.append(text)
        elif role in ("user", "assistant"):
            if text.strip():
                earlier.append({"role": role, "content": [text_block(text)]})
        elif role not in ("tool", "function"):
            raise ApiError(400, f"{where}.role {role!r} is not one of system, user, assistant")
    if not earlier or earlier[-1]["role"] != "user":
        raise ApiError(400, "the last message with text must be the user's")
    last = earlier.pop()
    text = "".join(b["text"] for b in last["content"] if b["type"] == "text")
    if instructions:
        text = "[The caller's instructions]:\n" + "\n\n".join(instructions) + "\n\n" + text
    options = data.get("stream_options")
    user = data.get("user")
    return ChatRequest(
        model,
        earlier,
        text,
        stream=data.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        user=user.strip()[:200] if isinstance(user, str) else "",
    )


def usage_of(usage: Usage) -> dict[str, int]:
    prompt = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
    }


def completion(
    run_id: str, model: str, text: str, usage: Usage, created: int, finish: str = "stop"
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish,
            }
        ],
        "usage": usage_of(usage),
    }


def chunk(
    run_id: str,
    model: str,
    created: int,
    delta: dict[str, Any] | None,
    finish: str | None = None,
    usage: Usage | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk`; `delta` None with `usage`: the last, usage-only one."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = usage_of(usage)
    return body


def model_list(ids: list[str]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [{"id": i, "object": "model", "created": 0, "owned_by": "perch"} for i in ids],
    }


def error_body(error: ApiError) -> dict[str, Any]:
    return {
        "error": {
            "message": error.message,
            "type": error.kind,
            "param": error.param,
            "code": error.code,
        }
    }
