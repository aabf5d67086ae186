"""The JSON body of a Messages API request, encoded by us once per request.

The SDK's `messages.stream()` copies the whole request tree in Python before encoding it
(to find file inputs and `NotGiven` values we never send): the costliest Python function of
a turn, for a body of 20 KB or more (persona prompt, tool schemas, history). Our blocks are
plain JSON data already, so the provider encodes the body itself with the C encoder and
hands the SDK the bytes. The stable parts (the tool schemas, the persona prompt's text) are
the same objects from one request to the next until they change, so their encoding is kept
by identity and reused. The body lists them in the order the API reads the prompt (tools,
system, messages), so the bytes of a request up to a prompt-cache breakpoint are a prefix
of the body itself.
"""

from __future__ import annotations

from typing import Any

from agents.model import ModelRequest
from agents.providers.json_body import EncodedOnce, encoder, head, utf8

_STABLE_MIN_CHARS = 512  # shorter strings are cheaper to encode than to look up


class BodyEncoder:
    """`encode(request)`: the streamed request's body as UTF-8 JSON bytes."""

    def __init__(self) -> None:
        self._memo = EncodedOnce()

    def encode(self, request: ModelRequest) -> bytes:
        parts = head(request)
        if request.tools:  # in the API's own order: tools, system, messages
            parts += [',"tools":', self._memo.encode(request.tools)]
        if request.system:
            parts += [',"system":', self._system(request.system)]
        if request.temperature is not None:
            parts += [',"temperature":', encoder.encode(float(request.temperature))]
        parts += [',"messages":', encoder.encode(request.messages), "}"]
        return utf8(parts)

    def _system(self, blocks: list[Any]) -> str:
        """The system blocks; a long text by identity, a block's mark after its text (where
        the messages' blocks carry it too: the marked block ends with its mark)."""
        out: list[str] = []
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            if not isinstance(text, str) or len(text) < _STABLE_MIN_CHARS or "type" not in block:
                out.append(encoder.encode(block))
                continue
            rest = encoder.encode({k: v for k, v in block.items() if k not in ("type", "text")})
            kind = encoder.encode(block["type"])
            tail = f",{rest[1:-1]}" if len(rest) > 2 else ""
            out.append(f'{{"type":{kind},"text":{self._memo.encode(text)}{tail}}}')
        return "[" + ",".join(out) + "]"
