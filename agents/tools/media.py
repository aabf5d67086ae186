"""`send_file {path, caption?}` and `react {emoji}`: files and reactions to the current chat.

Both tools are platform-free: they talk to small protocols the daemon implements for the
chat the run serves (`ToolContext.origin`; the reaction goes on the message that started the
run, which the daemon knows by `run_id`). `send_file` opens the file through the one opener
like the file tools (beneath the workspace, no symlink followed, hard-linked files refused)
and within the chat's upload limit; a platform's refusal comes back as a tool error the model can read.
"""

from __future__ import annotations

import mimetypes
from typing import Any, Protocol

from agents.tools.base import ToolContext, ToolError, ToolResult
from agents.tools.file_io import read_bytes, refuse_private, workspace_parts

MAX_CAPTION_CHARS = 1000


class FileOutlet(Protocol):
    """Sends a file to the chat a run serves (`origin`), or raises `ToolError` saying why not."""

    def upload_limit(self, origin: str | None) -> int:
        """The largest file that chat takes, in bytes (0: it takes none)."""
        ...

    async def send_file(
        self, origin: str | None, name: str, media_type: str, data: bytes, caption: str
    ) -> str:
        """Send it; returns how it went ("as a photo", "as a document")."""
        ...


class Reactions(Protocol):
    """Reacts to the message that started run `run_id`, or raises `ToolError`."""

    async def react(self, origin: str | None, run_id: str, emoji: str) -> None: ...


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f}".removesuffix(".0") + " MB"


class SendFileTool:
    name = "send_file"
    description = (
        "Send a workspace file to this chat (images as photos where the chat shows them, "
        "anything else as a document), with an optional caption. Write the file first."
    )

    def __init__(self, outlet: FileOutlet) -> None:
        self.outlet = outlet
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file, relative to the workspace."},
                "caption": {"type": "string", "description": "Optional text shown with it."},
            },
            "required": ["path"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = args.get("path")
        if not isinstance(path, str):
            raise ToolError("send_file needs 'path': a file path relative to the workspace")
        caption = args.get("caption", "")
        if not isinstance(caption, str):
            raise ToolError("send_file 'caption' must be a string")
        if len(caption) > MAX_CAPTION_CHARS:
            raise ToolError(
                f"send_file caption is {len(caption)} characters; the limit is "
                f"{MAX_CAPTION_CHARS} (send longer text as a message instead)"
            )
        limit = self.outlet.upload_limit(ctx.origin)
        if limit <= 0:
            raise ToolError("this chat cannot receive files; put the content in your reply")
        parts, shown = workspace_parts(path)
        refuse_private(parts, shown, ctx.private)
        if not parts:
            raise ToolError("send_file needs a file path, not the workspace itself")
        data = read_bytes(
            ctx.workspace,
            parts,
            shown,
            limit,
            too_big=f"this chat takes files up to {_megabytes(limit)}; send a smaller file",
            tool="send_file",
        )
        name = parts[-1]
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        how = await self.outlet.send_file(ctx.origin, name, media_type, data, caption)
        return ToolResult(f"Sent {shown} ({len(data):,} bytes) to the chat {how}.")


class ReactTool:
    name = "react"
    description = (
        "React with one emoji to the message you are answering, where the chat supports it. "
        "Sparingly; it replaces your reply only when it says everything."
    )

    def __init__(self, reactions: Reactions) -> None:
        self.reactions = reactions
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {"emoji": {"type": "string", "description": "One emoji."}},
            "required": ["emoji"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        emoji = args.get("emoji")
        if not isinstance(emoji, str) or not emoji.strip() or len(emoji.strip()) > 16:
            raise ToolError("react needs 'emoji': a single emoji such as 👍")
        await self.reactions.react(ctx.origin, ctx.run_id, emoji.strip())
        return ToolResult(f"Reacted with {emoji.strip()}.")
