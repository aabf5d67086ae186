"""Turn an MCP `CallToolResult` into the tool result the model reads.

Text blocks are kept as they are. Structured content reaches the model once: as JSON when the
result has no content blocks, else not at all, because the content blocks are the same result
for clients like us (the MCP spec has servers put the serialized JSON in a text block, and an
image is already attached, never repeated as base64 text). An image block goes to the model as an image beside a one-line
note of its type and size (PNG, JPEG, GIF or WebP within the limits of `agents.tool_images`;
any other is only a note saying why, as audio always is); an embedded resource shows its text or a note; a
resource link shows its URI. `isError` becomes an error result. Truncation of long results
is the agent loop's job, the same as for every other tool.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from agents.model import ImageBlock
from agents.tool_images import IMAGE_TYPES, MAX_IMAGE_BYTES, MAX_IMAGES, image_note, tool_image
from agents.tool_images import decoded_size as _size
from agents.tools.base import ToolResult

__all__ = ["IMAGE_TYPES", "MAX_IMAGES", "MAX_IMAGE_BYTES", "map_result"]


def _block_text(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return image_note(block.mime_type, _size(block.data))
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
    parts: list[str] = []
    images: list[ImageBlock] = []
    for block in result.content:
        if isinstance(block, types.ImageContent):
            size = _size(block.data)
            shown = tool_image(block.mime_type, block.data, size, len(images))
            if isinstance(shown, str):
                parts.append(shown)
            else:
                images.append(shown)
                parts.append(image_note(block.mime_type, size, "attached below"))
        else:
            parts.append(_block_text(block))
    structured = result.structured_content
    if structured is not None and not result.content:  # else the content already carries it
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    text = "\n".join(p for p in parts if p)
    if result.is_error and not text:
        text = "the tool reported an error without details"
    return ToolResult(text, is_error=bool(result.is_error), images=tuple(images))
