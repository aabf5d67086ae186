"""Request bodies encoded by Perch rather than by the provider SDKs.

Both SDKs prepare a request body in Python before encoding it: Anthropic's copies the whole
tree, OpenAI's walks it against its TypedDict annotations (about 5 ms of CPU for a 20 KB
chat request). Perch's messages are plain JSON data already, so the providers encode them
here with the C encoder and hand the SDK the bytes (`post(..., content=...)`, the path the
SDKs' own methods end in). `EncodedOnce` keeps the encoding of long-lived parts (tool
schemas, the persona text) while they are the same objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents.model import ModelRequest
from agents.surrogates import fix_text

encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_MEMO_SIZE = 16


class EncodedOnce:
    """Encodings of a few long-lived objects, by identity; each entry holds its object, so
    its id cannot be reused by another one while it is kept."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[object, str]] = {}

    def encode(self, value: Any, build: Callable[[Any], object] | None = None) -> str:
        """The JSON of `value` (or of `build(value)`, a conversion made once with it)."""
        entry = self._entries.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        encoded = encoder.encode(build(value) if build is not None else value)
        if len(self._entries) >= _MEMO_SIZE:
            self._entries.pop(next(iter(self._entries)))
        self._entries[id(value)] = (value, encoded)
        return encoded


def head(request: ModelRequest, stream: str = ',"stream":true') -> list[str]:
    """The start of a streamed request body: model, max_tokens and the stream flags."""
    model, max_tokens = encoder.encode(request.model), int(request.max_tokens)
    return ['{"model":', model, ',"max_tokens":', str(max_tokens), stream]


def utf8(parts: list[str]) -> bytes:
    """The body from its JSON `parts`, as UTF-8. A lone surrogate that got past the intake
    (no API takes one) can only stand inside a JSON string there: it becomes U+FFFD."""
    text = "".join(parts)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return fix_text(text).encode("utf-8")
