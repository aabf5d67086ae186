"""Earlier turns' tool calls, their long inputs cut before the history is sent again.

A `write_file` of a 200 KB document keeps that document in the call's input; sent back with
every later request of the session it would cost ~50,000 input tokens a turn for as long as
the turn stays in the history. `cut_long_inputs(messages)` returns the messages with every
string in a tool_use input longer than `MAX_INPUT_CHARS` cut to its head and tail around a
note (the file itself is in the workspace, for `read_file`). Messages without such a string
are returned as they are (no copy); the others are new dicts, the inputs never mutated. The
cut is the same on every turn, so the prompt prefix stays cacheable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_INPUT_CHARS = 4_000
_HEAD = 3_000
_TAIL = 800


def cut_long_inputs(messages: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for message in messages:
        if not _with_long_call(message):
            out.append(message)
            continue
        blocks = [_cut_call(b) if _long_call(b) else b for b in message["content"]]
        out.append({**message, "content": blocks})
    return out


def _with_long_call(message: Any) -> bool:
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return False
    content = message.get("content")
    return isinstance(content, list) and any(_long_call(block) for block in content)


def _long_call(block: Any) -> bool:
    is_call = isinstance(block, dict) and block.get("type") == "tool_use"
    return is_call and _has_long(block.get("input"))


def _has_long(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) > MAX_INPUT_CHARS
    if isinstance(value, dict):
        return any(_has_long(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_long(v) for v in value)
    return False


def _cut_call(block: dict[str, Any]) -> dict[str, Any]:
    return {**block, "input": _cut(block["input"])}


def _cut(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_INPUT_CHARS:
        left = len(value) - _HEAD - _TAIL
        note = f"\n[... {left:,} characters of this input left out of the history ...]\n"
        return value[:_HEAD] + note + value[-_TAIL:]
    if isinstance(value, dict):
        return {k: _cut(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value
