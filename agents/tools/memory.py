"""Memory tools: `memory_append` (a timestamped bullet in today's `memory/YYYY-MM-DD.md`) and
`memory_search` (case-insensitive, all terms ANDed, over `MEMORY.md` and `memory/*.md`).

Dates and times come from the injectable `clock` (local time by default). Search order:
`MEMORY.md` first (curated long-term facts), then `memory/*.md` newest first (by modification
time, then name). Paths go through `resolve_in_workspace`, so a `memory/` symlink out is refused,
and files are opened beneath the workspace descriptor without following symlinks; a memory
file with several hard links (which could name any file of the daemon's user) is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agents.tools.base import Tool, ToolContext, ToolError, ToolResult
from agents.tools.disk_room import ensure_room
from agents.tools.file_io import open_regular
from agents.tools.files import resolve_in_workspace

Clock = Callable[[], datetime]

MAX_APPEND_CHARS = 4_000
MAX_SEARCH_LIMIT = 50
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 2_000_000


def local_now() -> datetime:
    """The current local time, timezone-aware."""
    return datetime.now().astimezone()


def _text_arg(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if value is None:
        raise ToolError(f"missing required argument {name!r} (a string)")
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ToolError(f"argument {name!r} is empty")
    return value


def _bullet(text: str, now: datetime) -> str:
    """`- HH:MM text`, continuation lines indented under the bullet."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    body = "\n".join([lines[0], *("  " + line if line else "" for line in lines[1:])])
    return f"- {now:%H:%M} {body}\n"


def _append(workspace: Path, real: Path, heading: str, bullet: str) -> None:
    real.parent.mkdir(parents=True, exist_ok=True)
    if not real.exists() and _create_with(real, f"{heading}\n\n{bullet}"):
        return
    shown = real.relative_to(workspace.resolve()).as_posix()
    parts = real.relative_to(workspace.resolve()).parts
    fd = open_regular(workspace, parts, shown, os.O_WRONLY | os.O_APPEND)
    try:
        # One write on an O_APPEND descriptor: concurrent appenders never interleave mid-line.
        os.write(fd, bullet.encode("utf-8"))
    finally:
        os.close(fd)


def _create_with(real: Path, data: str) -> bool:
    """Create `real` already holding `data` (written aside, then linked into place), so no
    appender ever sees it empty; False if another appender created it first."""
    fd, temp = tempfile.mkstemp(dir=real.parent, prefix=".memory-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8"))
        os.chmod(temp, 0o644)
        try:
            os.link(temp, real)
        except FileExistsError:
            return False
        return True
    finally:
        os.unlink(temp)


class MemoryAppendTool:
    """`memory_append {text}`: note something worth remembering in today's memory file."""

    name = "memory_append"
    description = (
        "Save a note for later conversations: a timestamped line in memory/<today>.md. One "
        "self-contained note per call: facts, preferences, decisions, follow-ups."
    )

    def __init__(self, *, clock: Clock = local_now, keep_free: int | None = None) -> None:
        self._clock = clock
        self.keep_free = keep_free  # bytes left free on the disk (None: disk_room's rule)
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "description": "The note, written so it makes sense on its own later.",
                },
            },
            "required": ["text"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text = _text_arg(args, "text")
        if len(text) > MAX_APPEND_CHARS:
            raise ToolError(
                f"text is {len(text):,} characters, over the {MAX_APPEND_CHARS:,} cap of "
                "memory_append; keep notes short or write a file with write_file"
            )
        now = self._clock()
        rel = f"memory/{now:%Y-%m-%d}.md"
        real = resolve_in_workspace(ctx.workspace, rel)
        bullet = _bullet(text, now)
        ensure_room(ctx.workspace, len(bullet.encode("utf-8")), self.keep_free)
        try:
            await asyncio.to_thread(_append, ctx.workspace, real, f"# {now:%Y-%m-%d}", bullet)
        except OSError as exc:
            raise ToolError(f"cannot append to {rel} ({exc.strerror})") from None
        return ToolResult(f"Saved to {rel}")


@dataclass(frozen=True, slots=True)
class _Hit:
    file: str
    line_no: int
    line: str


def _memory_files(workspace: Path) -> list[tuple[str, Path]]:
    """(shown name, real path) of MEMORY.md and memory/*.md, in search order."""
    found: list[tuple[str, Path]] = []
    with contextlib.suppress(ToolError):
        found.append(("MEMORY.md", resolve_in_workspace(workspace, "MEMORY.md")))
    try:
        memory_dir = resolve_in_workspace(workspace, "memory")
        names = [p.name for p in memory_dir.glob("*.md")]
    except (ToolError, OSError):
        names = []
    dated: list[tuple[float, str, Path]] = []
    for name in names:
        try:
            real = resolve_in_workspace(workspace, f"memory/{name}")
            dated.append((real.stat().st_mtime, name, real))
        except (ToolError, OSError):
            continue
    dated.sort(key=lambda item: (item[0], item[1]), reverse=True)
    found.extend((f"memory/{name}", real) for _, name, real in dated)
    return [(shown, real) for shown, real in found if real.is_file()]


def _search(workspace: Path, terms: list[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for shown, real in _memory_files(workspace):
        try:
            parts = real.relative_to(workspace.resolve()).parts
            with os.fdopen(open_regular(workspace, parts, shown, os.O_RDONLY), "rb") as fh:
                data = fh.read(MAX_FILE_BYTES)
        except (OSError, ToolError, ValueError):
            continue
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            lowered = line.lower()
            if all(term in lowered for term in terms):
                hits.append(_Hit(shown, number, line.strip()))
    return hits


class MemorySearchTool:
    """`memory_search {query, limit=10}`: lines of memory files containing every query term."""

    name = "memory_search"
    description = (
        "Search MEMORY.md and memory/*.md for lines holding all the query's words (any case): "
        "file:line and the line, MEMORY.md first, then the newest days. Use a few distinctive "
        "words; it matches words, not meaning."
    )

    def __init__(self) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Words to look for; a line matches when it contains all of them.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_LIMIT,
                    "description": f"Maximum results (default 10, at most {MAX_SEARCH_LIMIT}).",
                },
            },
            "required": ["query"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = _text_arg(args, "query")
        limit = args.get("limit", 10)
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ToolError(f"argument 'limit' must be an integer, got {type(limit).__name__}")
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ToolError(f"argument 'limit' must be between 1 and {MAX_SEARCH_LIMIT}")
        terms = query.lower().split()
        hits = await asyncio.to_thread(_search, ctx.workspace, terms)
        if not hits:
            return ToolResult(f"No memory lines contain all of: {' '.join(terms)}")
        lines = []
        for hit in hits[:limit]:
            line = hit.line
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " [...]"
            lines.append(f"{hit.file}:{hit.line_no}: {line}")
        if len(hits) > limit:
            lines.append(f"[... {len(hits) - limit} more matches; narrow the query]")
        return ToolResult("\n".join(lines))


def memory_tools(*, clock: Clock = local_now) -> list[Tool]:
    """`memory_append` and `memory_search`; `clock` decides today's file (tests inject it)."""
    return [MemoryAppendTool(clock=clock), MemorySearchTool()]
