"""Turn an MCP `CallToolResult` into the text tool result the model reads.

Text blocks are kept as they are; structured content is added as JSON when the text blocks
do not already carry it; an image (PNG, JPEG, GIF, WebP up to `MAX_IMAGE_BYTES`, at most
`MAX_IMAGES` a result) goes to the model as an image beside a one-line note of its type and
size, any other image or audio block is only that note; an embedded resource shows its text
or a note; a resource link shows its URI. `isError` becomes an error result. Truncation of
long text is the agent loop's job, the same as for every other tool.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as types

from agents.model import ImageBlock
from agents.tools.base import ToolResult

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # what the model APIs take per image
MAX_IMAGES = 4  # a result's images shown to the model; the rest are notes


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _image(block: types.ImageContent) -> ImageBlock | None:
    """The image as the model sees it, or None when it cannot be shown."""
    mime = block.mime_type.lower()
    if mime not in IMAGE_TYPES or _size(block.data) > MAX_IMAGE_BYTES:
        return None
    try:  # the APIs refuse a request with broken base64: check it here, once
        base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return {"type": "image", "source": {"type": "base64", "media_type": mime, "data": block.data}}


def _block_text(block: Any, shown: bool = False) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        what = "attached below" if shown else "not shown"
        return f"[image {block.mime_type}, {_size(block.data)} bytes: {what}]"
    if isinstance(block, types.AudioContent):
        return f"[audio {block.mime_type}, {_size(block.data)} bytes: not shown as text]"
    if isinstance(block, types.ResourceLink):
        return f"[resource {block.uri}" + (f": {block.description}]" if block.description else "]")
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        mime = getattr(resource, "mime_type", None) or "binary"
        return f"[resource {resource.uri}, {mime}: not shown as text]"
    return f"[{getattr(block, 'type', 'unknown')} content: not shown as text]"


def map_result(result: types.CallToolResult) -> ToolResult:
    images: list[ImageBlock] = []
    parts: list[str] = []
    for block in result.content:
        image = _image(block) if isinstance(block, types.ImageContent) else None
        if image is not None and len(images) < MAX_IMAGES:
            images.append(image)
            parts.append(_block_text(block, shown=True))
        else:
            parts.append(_block_text(block))
    structured = result.structured_content
    if structured is not None:
        as_json = json.dumps(structured, ensure_ascii=False, indent=1)
        texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
        if not any(_same_json(t, structured) for t in texts):
            parts.append(as_json)
    text = "\n".join(p for p in parts if p)
    if result.is_error and not text:
        text = "the tool reported an error without details"
    return ToolResult(text, is_error=bool(result.is_error), images=tuple(images))


def _same_json(text: str, value: Any) -> bool:
    wrapped = value.get("result") if isinstance(value, dict) and len(value) == 1 else None
    if text == wrapped:
        return True
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return bool(parsed == value or (wrapped is not None and parsed == wrapped))
