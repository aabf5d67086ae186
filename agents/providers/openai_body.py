"""The JSON body of a streamed Chat Completions request, encoded by us (`json_body`).

The openai SDK's `chat.completions.create` walks the whole request against its TypedDict
annotations before encoding it: about 5 ms of CPU for a request with a persona prompt, ten
tool schemas and a short history, more than the rest of a turn. The provider sends the same
JSON through the SDK's `post` instead; the converted tool list is kept while the tool
schemas are the same object.
"""

from __future__ import annotations

from agents.model import ModelRequest
from agents.providers.json_body import EncodedOnce, encoder, head, utf8
from agents.providers.openai_wire import to_chat_messages, to_chat_tools


class ChatBodyEncoder:
    """`encode(request, tool_images)`: the body as UTF-8 JSON bytes."""

    def __init__(self) -> None:
        self._tools = EncodedOnce()

    def encode(self, request: ModelRequest, tool_images: bool = True) -> bytes:
        messages = to_chat_messages(request.system, request.messages, tool_images=tool_images)
        parts = head(request, ',"stream":true,"stream_options":{"include_usage":true}')
        if request.tools:
            parts += [',"tools":', self._tools.encode(request.tools, to_chat_tools)]
        if request.temperature is not None:
            parts += [',"temperature":', encoder.encode(float(request.temperature))]
        parts += [',"messages":', encoder.encode(messages), "}"]
        return utf8(parts)
