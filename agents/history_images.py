"""The user's images in the history: sent for a few turns, then a short note in their place.

A photo costs about 1,600 tokens in every request that carries it. `age_out_images(messages,
keep_turns)` returns the history with the images of user turns older than the last
`keep_turns` replaced by a one-line note; the store keeps the images themselves. Counting the
turn an image arrives in (not in the history yet), an image is sent with `keep_turns + 1`
turns. The note is the same text on every turn, so once an image has aged out the request's
bytes stay as they are. Images inside tool results are not here: they leave a run's messages
when it ends (`agents.tool_images`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.model import text_block
from agents.tool_images import decoded_size, image_note

AGED_OUT = "sent earlier in this chat; no longer shown (ask for it again if you need to see it)"


def age_out_images(messages: Sequence[Any], keep_turns: int) -> list[Any]:
    """`messages` with the images of all but the last `keep_turns` user turns replaced by a
    note. Messages without such images are returned as they are (no copy); the others are
    new dicts, the inputs never mutated."""
    starts = [i for i, m in enumerate(messages) if _user_turn(m)]
    if len(starts) <= keep_turns:
        return list(messages)
    cut = starts[-keep_turns] if keep_turns > 0 else len(messages)
    out = list(messages)
    for index in range(cut):
        message = messages[index]
        if _role(message) == "user" and any(_is_image(b) for b in _content(message)):
            blocks = [_note(b) if _is_image(b) else b for b in _content(message)]
            out[index] = {**message, "content": blocks}
    return out


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _content(message: Any) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _user_turn(message: Any) -> bool:
    """A user message with something besides tool results (as `agents.history` counts)."""
    blocks = _content(message) if _role(message) == "user" else []
    return any(not (isinstance(b, dict) and b.get("type") == "tool_result") for b in blocks)


def _is_image(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "image"


def _note(image: dict[str, Any]) -> Any:
    source = image.get("source")
    source = source if isinstance(source, dict) else {}
    data = source.get("data")
    size = decoded_size(data) if isinstance(data, str) else 0
    return text_block(image_note(str(source.get("media_type", "image")), size, AGED_OUT))
