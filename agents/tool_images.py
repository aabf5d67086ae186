"""Images inside tool results: which ones the model may see, and how they leave history.

A tool may return images with its text (`ToolResult.images`); the loop puts them into the
`tool_result` block's content after the text, as the Messages API allows. Only PNG, JPEG, GIF
and WebP up to `MAX_IMAGE_BYTES` each (the inbound image cap of the channels) and at most
`MAX_IMAGES` per result are shown; anything else becomes a one-line note (`image_note`).

Images are for the run that fetched them: when the run ends, `without_tool_images` replaces
each one in its new messages by a short note, so the stored history never keeps megabytes of
base64 (the model already answered about the picture in that run).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any, cast

from agents.model import ImageBlock, Message, TextBlock, image_block, text_block

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5_000_000  # as channels' max_image_bytes default
MAX_IMAGES = 4


def decoded_size(data: str) -> int:
    """Bytes a base64 string decodes to (its length if it is not base64)."""
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def image_note(mime: str, size: int, why: str = "not shown as text") -> str:
    return f"[image {mime}, {size} bytes: {why}]"


def tool_image(mime: str, data: str, size: int, shown: int) -> ImageBlock | str:
    """The image block to show for a tool's image (base64 `data`), or a note saying why not
    (another type, over the size cap, or `shown` images already in this result)."""
    mime = mime.lower().strip()
    if mime == "image/jpg":
        mime = "image/jpeg"
    if mime not in IMAGE_TYPES:
        return image_note(mime, size, "not shown (only PNG, JPEG, GIF and WebP are)")
    if size > MAX_IMAGE_BYTES:
        return image_note(mime, size, f"not shown (over {MAX_IMAGE_BYTES} bytes)")
    if shown >= MAX_IMAGES:
        return image_note(mime, size, f"not shown (only {MAX_IMAGES} images per result)")
    try:  # the APIs refuse a whole request with broken base64: check it here, once
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return image_note(mime, size, "not shown (its data is not valid base64)")
    return image_block(mime, data)


def _stored_note(image: dict[str, Any]) -> TextBlock:
    source = image.get("source")
    source = source if isinstance(source, dict) else {}
    mime = str(source.get("media_type", "image"))
    data = source.get("data")
    size = decoded_size(data) if isinstance(data, str) else 0
    note = image_note(mime, size, "shown to the model when the tool ran; not kept in history")
    return text_block(note)


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image" for p in content
    )


def without_tool_images(messages: Iterable[Message]) -> list[Message]:
    """`messages` with every image inside a tool_result replaced by a short text note.
    Messages without such images are returned as they are (not copied); the others are new
    dicts, so the originals stay untouched. User images outside tool results are kept."""
    out: list[Message] = []
    for message in messages:
        blocks = message["content"]
        if not any(b.get("type") == "tool_result" and _has_image(b.get("content")) for b in blocks):
            out.append(message)
            continue
        content: list[Any] = []
        for block in blocks:
            inner = block.get("content")
            if block.get("type") == "tool_result" and _has_image(inner):
                parts = [
                    _stored_note(p) if isinstance(p, dict) and p.get("type") == "image" else p
                    for p in cast(list[Any], inner)
                ]
                content.append({**block, "content": parts})
            else:
                content.append(block)
        out.append({"role": message["role"], "content": content})
    return out
