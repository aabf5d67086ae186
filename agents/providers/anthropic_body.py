"""The JSON body of a Messages API request, encoded by us once per request.

The SDK's `messages.stream()` copies the whole request tree in Python before encoding it
(to find file inputs and `NotGiven` values we never send): the costliest Python function of
a turn, for a body of 20 KB or more (persona prompt, tool schemas, history). Our blocks are
plain JSON data already, so the provider encodes the body itself with the C encoder and
hands the SDK the bytes. The stable parts (the tool schemas, the persona prompt's text) are
the same objects from one request to the next until they change, so their encoding is kept
by identity and reused.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from agents.model import ModelRequest
from agents.surrogates import fix_data

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_STABLE_MIN_CHARS = 512  # shorter strings are cheaper to encode than to look up
_MEMO_SIZE = 16


class _Memo:
    """Encodings of a few long-lived objects, by identity; each entry holds its object, so
    the id cannot be reused by another one while it is kept."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[object, str]] = {}

    def encode(self, value: object) -> str:
        entry = self._entries.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1]
        encoded = _encoder.encode(value)
        if len(self._entries) >= _MEMO_SIZE:
            self._entries.pop(next(iter(self._entries)))
        self._entries[id(value)] = (value, encoded)
        return encoded


class BodyEncoder:
    """`encode(request)`: the streamed request's body as UTF-8 JSON bytes."""

    def __init__(self) -> None:
        self._memo = _Memo()

    def encode(self, request: ModelRequest) -> bytes:
        parts = [
            '{"model":',
            _encoder.encode(request.model),
            ',"max_tokens":',
            str(int(request.max_tokens)),
            ',"stream":true',
        ]
        if request.system:
            parts += [',"system":', self._system(request.system)]
        if request.tools:
            parts += [',"tools":', self._memo.encode(request.tools)]
        if request.temperature is not None:
            parts += [',"temperature":', _encoder.encode(float(request.temperature))]
        parts += [',"messages":', _encoder.encode(request.messages), "}"]
        text = "".join(parts)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate that got past the intake: U+FFFD
            return self.encode(_fixed(request))

    def _system(self, blocks: list[Any]) -> str:
        out: list[str] = []
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            if not isinstance(text, str) or len(text) < _STABLE_MIN_CHARS:
                out.append(_encoder.encode(block))
                continue
            rest = {k: v for k, v in block.items() if k != "text"}
            head = _encoder.encode(rest)[:-1]  # without its closing brace
            sep = "," if rest else ""
            out.append(f'{head}{sep}"text":{self._memo.encode(text)}}}')
        return "[" + ",".join(out) + "]"


def _fixed(request: ModelRequest) -> ModelRequest:
    return replace(
        request,
        system=fix_data(request.system),
        messages=fix_data(request.messages),
        tools=fix_data(request.tools),
    )
