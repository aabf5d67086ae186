"""How big a history is: characters, images, and the token estimate made from them.

Tokens are estimated as characters / 4 plus 1,600 per image; tool_use inputs count as their
JSON, tool results as their text. Used where no API count is at hand (`agents.history`'s
pruning, a turn's context before any call finished).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agents.model import text_block

CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1600


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [dict(text_block(content))]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)
    return 0


def block_chars_and_images(block: dict[str, Any]) -> tuple[int, int]:
    kind = block.get("type")
    if kind == "image":
        return 0, 1
    if kind == "text":
        return len(str(block.get("text", ""))), 0
    if kind == "tool_use":
        encoded = json.dumps(block.get("input", {}), ensure_ascii=False, default=str)
        return len(str(block.get("name", ""))) + len(encoded), 0
    if kind == "tool_result":
        content = block.get("content")
        images = 0
        if isinstance(content, list):
            images = sum(1 for b in content if isinstance(b, dict) and b.get("type") == "image")
        return _result_text_chars(content), images
    if kind in ("thinking", "redacted_thinking"):
        return len(str(block.get("thinking", block.get("data", "")))), 0
    return len(json.dumps(block, ensure_ascii=False, default=str)), 0


def chars_and_images(messages: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    chars = images = 0
    for message in messages:
        for block in _blocks(message):
            c, i = block_chars_and_images(block)
            chars, images = chars + c, images + i
    return chars, images


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A rough token count: characters / 4, plus 1,600 per image."""
    chars, images = chars_and_images(messages)
    return -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS
