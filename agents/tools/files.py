"""File tools confined to the session workspace: `read_file`, `write_file`, `edit_file`, `list_dir`.

A path is split into plain components (`file_io.workspace_parts`: absolute paths, `..` and NUL
refused) and opened through the one opener, `agents.workspace_files`: beneath an open
workspace descriptor, never through a symlink (`openat2` RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
or component by component with O_NOFOLLOW), so a directory swapped for a symlink during a
call makes it fail instead of leading outside. Symlinks inside the workspace are shown by
`list_dir` but not followed. Writes are atomic (temp file + rename in the parent's
descriptor); files with several hard links are not read or edited.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.tools.base import Tool, ToolContext, ToolError, ToolResult
from agents.tools.disk_room import ensure_room
from agents.tools.file_io import (
    list_entries,
    read_text,
    refuse_private,
    workspace_parts,
    write_atomic,
)

DEFAULT_MAX_READ_BYTES = 2_000_000
DEFAULT_MAX_WRITE_BYTES = 5_000_000
DEFAULT_READ_LINES = 2_000
DEFAULT_MAX_ENTRIES = 200


def _str_arg(args: dict[str, Any], name: str, *, default: str | None = None) -> str:
    value = args.get(name, default)
    if value is None:
        raise ToolError(f"missing required argument {name!r} (a string)")
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
    return value


def _int_arg(args: dict[str, Any], name: str, default: int, *, minimum: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"argument {name!r} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ToolError(f"argument {name!r} must be >= {minimum}, got {value}")
    return value


class ReadFileTool:
    """`read_file {path, offset?, limit?}`: a text file's lines, 1-based `offset`."""

    name = "read_file"
    description = (
        "Read a UTF-8 text file in the workspace; long files come in pages (offset, limit). "
        "Binary files and files over the size cap are refused."
    )

    def __init__(
        self, *, max_bytes: int = DEFAULT_MAX_READ_BYTES, default_limit: int = DEFAULT_READ_LINES
    ) -> None:
        self.max_bytes = max_bytes
        self.default_limit = default_limit
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "First line to return, 1-based (default 1).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": f"Maximum number of lines to return (default {default_limit}).",
                },
            },
            "required": ["path"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _str_arg(args, "path")
        offset = _int_arg(args, "offset", 1, minimum=1)
        limit = _int_arg(args, "limit", self.default_limit, minimum=1)
        parts, shown = workspace_parts(path)
        refuse_private(parts, shown, ctx.private)
        text = await asyncio.to_thread(read_text, ctx.workspace, parts, shown, self.max_bytes)
        lines = text.splitlines(keepends=True)
        if offset > 1 and offset > len(lines):
            raise ToolError(f"offset {offset} is past the end of {shown} ({len(lines)} lines)")
        page = lines[offset - 1 : offset - 1 + limit]
        content = "".join(page)
        rest = len(lines) - (offset - 1 + len(page))
        if rest > 0:
            next_offset = offset + len(page)
            content += (
                f"\n[... {rest} more lines; call read_file with offset={next_offset} to continue]"
            )
        return ToolResult(content)


class WriteFileTool:
    """`write_file {path, content}`: create or replace a file, making parent directories."""

    name = "write_file"
    description = (
        "Create or overwrite a text file in the workspace (folders are created). Replaces the "
        "whole file: use edit_file for small changes."
    )

    def __init__(
        self, *, max_bytes: int = DEFAULT_MAX_WRITE_BYTES, keep_free: int | None = None
    ) -> None:
        self.max_bytes = max_bytes
        self.keep_free = keep_free  # bytes left free on the disk (None: disk_room's rule)
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "content": {"type": "string", "description": "The complete new file content."},
            },
            "required": ["path", "content"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _str_arg(args, "path")
        content = _str_arg(args, "content")
        data = content.encode("utf-8")
        if len(data) > self.max_bytes:
            raise ToolError(
                f"content is {len(data):,} bytes, over the {self.max_bytes:,}-byte cap of "
                "write_file; write it in smaller files"
            )
        parts, shown = workspace_parts(path)
        refuse_private(parts, shown, ctx.private)
        if not parts:
            raise ToolError("path names the workspace itself; give a file path")
        ensure_room(ctx.workspace, len(data), self.keep_free)
        await asyncio.to_thread(write_atomic, ctx.workspace, parts, shown, data)
        return ToolResult(f"Wrote {len(data):,} bytes to {shown}")


class EditFileTool:
    """`edit_file {path, old_text, new_text}`: replace one exact, unique occurrence."""

    name = "edit_file"
    description = (
        "Replace text in a workspace file. old_text must match exactly (whitespace included) "
        "and occur once; add surrounding lines to make it unique. new_text may be empty."
    )

    def __init__(
        self, *, max_bytes: int = DEFAULT_MAX_READ_BYTES, keep_free: int | None = None
    ) -> None:
        self.max_bytes = max_bytes
        self.keep_free = keep_free  # bytes left free on the disk (None: disk_room's rule)
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "old_text": {
                    "type": "string",
                    "description": "Exact text to replace; must occur exactly once in the file.",
                },
                "new_text": {"type": "string", "description": "Replacement text."},
            },
            "required": ["path", "old_text", "new_text"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _str_arg(args, "path")
        old_text = _str_arg(args, "old_text")
        new_text = _str_arg(args, "new_text")
        if old_text == "":
            raise ToolError("old_text is empty; give the exact text to replace")
        parts, shown = workspace_parts(path)
        refuse_private(parts, shown, ctx.private)
        text = await asyncio.to_thread(read_text, ctx.workspace, parts, shown, self.max_bytes)
        count = text.count(old_text)
        if count == 0:
            raise ToolError(
                f"old_text was not found in {shown}; read the file and copy the exact text "
                "(whitespace and line breaks must match)"
            )
        if count > 1:
            raise ToolError(
                f"old_text occurs {count} times in {shown}; include more surrounding lines so "
                "it matches exactly once"
            )
        updated = text.replace(old_text, new_text, 1)
        data = updated.encode("utf-8")
        ensure_room(ctx.workspace, len(data), self.keep_free)
        await asyncio.to_thread(write_atomic, ctx.workspace, parts, shown, data)
        return ToolResult(f"Edited {shown}: replaced 1 occurrence")


class ListDirTool:
    """`list_dir {path="."}`: entries sorted by name, `/` after directories, sizes for files."""

    name = "list_dir"
    description = (
        "List a workspace folder (default: its root): folders end with '/', files show their "
        "size, symlinks their target."
    )

    def __init__(self, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Directory relative to the workspace (default '.').",
                },
            },
            "required": [],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _str_arg(args, "path", default=".")
        parts, shown = workspace_parts(path)
        refuse_private(parts, shown, ctx.private)
        listing = await asyncio.to_thread(
            list_entries, ctx.workspace, parts, shown, self.max_entries
        )
        return ToolResult(listing)


def file_tools() -> list[Tool]:
    """The four workspace file tools with default caps."""
    return [ReadFileTool(), WriteFileTool(), EditFileTool(), ListDirTool()]
