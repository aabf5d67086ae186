"""The JSON body of a streamed Chat Completions request, encoded by us (`json_body`).

The openai SDK's `chat.completions.create` walks the whole request against its TypedDict
annotations before encoding it: about 5 ms of CPU for a request with a persona prompt, ten
tool schemas and a short history, more than the rest of a turn. The provider sends the same
JSON through the SDK's `post` instead; the converted tool list is kept while the tool
schemas are the same object.
"""

from __future__ import annotations

from typing import Any

from agents.model import ModelRequest
from agents.providers.json_body import EncodedOnce, encoder, utf8
from agents.providers.openai_wire import to_chat_messages, to_chat_tools


class ChatBodyEncoder:
    """`encode(request, tool_images)`: the body as UTF-8 JSON bytes."""

    def __init__(self) -> None:
        self._tools = EncodedOnce()

    def encode(self, request: ModelRequest, tool_images: bool = True) -> bytes:
        messages = to_chat_messages(request.system, request.messages, tool_images=tool_images)
        parts = [
            '{"model":',
            encoder.encode(request.model),
            ',"max_tokens":',
            str(int(request.max_tokens)),
            ',"stream":true,"stream_options":{"include_usage":true}',
        ]
        if request.tools:
            parts += [',"tools":', self._tools.encode(request.tools, to_chat_tools)]
        if request.temperature is not None:
            parts += [',"temperature":', encoder.encode(float(request.temperature))]
        parts += [',"messages":', encoder.encode(messages), "}"]
        fields: dict[str, Any] = {"model": request.model, "messages": messages}
        if request.tools:
            fields["tools"] = to_chat_tools(request.tools)
        return utf8("".join(parts), fields | _rest(request))


def _rest(request: ModelRequest) -> dict[str, Any]:
    rest: dict[str, Any] = {"max_tokens": request.max_tokens, "stream": True}
    rest["stream_options"] = {"include_usage": True}
    if request.temperature is not None:
        rest["temperature"] = float(request.temperature)
    return rest
