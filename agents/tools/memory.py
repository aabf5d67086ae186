"""Memory tools: `memory_append` (a timestamped bullet in today's `memory/YYYY-MM-DD.md`) and
`memory_search`: with the daemon's search index (`MemoryIndex`), the memory notes and past
conversations this chat may see, ranked, each with where it came from and when; without one
(a bare agent), a plain scan: case-insensitive, all terms ANDed, over `MEMORY.md` and
`memory/*.md`.

Dates and times come from the injectable `clock` (local time by default). Search order:
`MEMORY.md` first (curated long-term facts), then `memory/*.md` newest first (by modification
time, then name). Every file goes through the one opener (`agents.workspace_files`): the
append works on the descriptor of `memory/` opened without following links, so swapping
`memory/` for a symlink during a call makes it fail instead of writing elsewhere; a symlinked
memory file, or one with several hard links (it could name any file of the daemon's user),
is neither searched nor appended to.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from agents.recall import Recalled
from agents.recall_quote import quote_label, quote_text
from agents.tools.base import Tool, ToolContext, ToolError, ToolResult
from agents.tools.disk_room import ensure_room
from agents.tools.file_io import os_problem
from agents.workspace_files import (
    append,
    check_regular,
    open_beneath,
    open_dir,
    read_capped,
    workspace_root,
)

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
        if "memory" in ctx.private:
            raise ToolError(
                "memory_append writes the owner's notes, which this conversation cannot change; "
                "nothing was saved"
            )
        text = _text_arg(args, "text")
        if len(text) > MAX_APPEND_CHARS:
            raise ToolError(
                f"text is {len(text):,} characters, over the {MAX_APPEND_CHARS:,} cap of "
                "memory_append; keep notes short or write a file with write_file"
            )
        now = self._clock()
        name = f"{now:%Y-%m-%d}.md"
        rel = f"memory/{name}"
        bullet = _bullet(text, now).encode("utf-8")
        ensure_room(ctx.workspace, len(bullet), self.keep_free)
        heading = f"# {now:%Y-%m-%d}\n\n".encode()
        try:
            await asyncio.to_thread(append, ctx.workspace, ("memory", name), bullet, first=heading)
        except OSError as exc:
            raise os_problem(exc, rel, "append to") from None
        return ToolResult(f"Saved to {rel}")


@dataclass(frozen=True, slots=True)
class _Hit:
    file: str
    line_no: int
    line: str


def _read_memory(dir_fd: int, name: str) -> bytes | None:
    """A memory file's start, opened in `dir_fd` without following links; None if refused."""
    try:
        fd = open_beneath(dir_fd, (name,), os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        check_regular(fd)
        return read_capped(fd, MAX_FILE_BYTES)[:MAX_FILE_BYTES]
    except OSError:
        return None
    finally:
        os.close(fd)


def _memory_texts(workspace: Path) -> list[tuple[str, bytes]]:
    """(shown name, content) of MEMORY.md and memory/*.md, in search order."""
    found: list[tuple[str, bytes]] = []
    with contextlib.ExitStack() as stack:
        try:
            root = stack.enter_context(workspace_root(workspace))
        except OSError:
            return found
        data = _read_memory(root, "MEMORY.md")
        if data is not None:
            found.append(("MEMORY.md", data))
        try:
            memory = open_dir(root, ("memory",))
        except OSError:
            return found
        stack.callback(os.close, memory)
        dated: list[tuple[float, str]] = []
        with os.scandir(memory) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if entry.name.endswith(".md") and stat.S_ISREG(st.st_mode):
                        dated.append((st.st_mtime, entry.name))
        for _, name in sorted(dated, reverse=True):
            data = _read_memory(memory, name)
            if data is not None:
                found.append((f"memory/{name}", data))
    return found


def _search(workspace: Path, terms: list[str]) -> list[_Hit]:
    hits: list[_Hit] = []
    for shown, data in _memory_texts(workspace):
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            lowered = line.lower()
            if all(term in lowered for term in terms):
                hits.append(_Hit(shown, number, line.strip()))
    return hits


class MemoryIndex(Protocol):
    async def search_memory(
        self, query: str, *, session_key: str, limit: int, requester: str | None = None
    ) -> list[Recalled]:
        """Notes and conversations matching `query` that this session may see, best first
        (`requester`, who wrote the message, knows the owner in a DM channel of its own)."""


SCAN_DESCRIPTION = (
    "Search MEMORY.md and memory/*.md for lines holding all the query's words (any case): "
    "file:line and the line, MEMORY.md first, then the newest days. Use a few distinctive "
    "words; it matches words, not meaning."
)
INDEX_DESCRIPTION = (
    "Search your memory notes (MEMORY.md, memory/*.md) and earlier conversations of this "
    "chat: the best matches first, each with where it came from and when. Use a few "
    "distinctive words; it matches words (any form: birthday finds birthdays), not meaning."
)


class MemorySearchTool:
    """`memory_search {query, limit=10}`: ranked hits from the index, or lines of memory
    files containing every query term."""

    name = "memory_search"

    def __init__(self, index: MemoryIndex | None = None) -> None:
        self.index = index
        self.description = SCAN_DESCRIPTION if index is None else INDEX_DESCRIPTION
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
        if self.index is not None:
            return await self._ranked(query, limit, ctx)
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

    async def _ranked(self, query: str, limit: int, ctx: ToolContext) -> ToolResult:
        assert self.index is not None
        found = await self.index.search_memory(
            query, session_key=ctx.session_key, limit=limit, requester=ctx.requester
        )
        if not found:
            return ToolResult(f"Nothing in memory matches: {query.strip()}")
        lines = []
        for n, item in enumerate(found, start=1):
            when = (
                f", {datetime.fromtimestamp(item.when).astimezone():%Y-%m-%d %H:%M}"
                if item.when
                else ""
            )
            text = (
                item.text
                if len(item.text) <= MAX_LINE_CHARS * 2
                else item.text[: MAX_LINE_CHARS * 2] + " [...]"
            )
            lines.append(quote_text(f"{n}. [{quote_label(item.where)}{when}] {quote_text(text)}"))
        return ToolResult("\n".join(lines))


def memory_tools(index: MemoryIndex | None = None, *, clock: Clock = local_now) -> list[Tool]:
    """`memory_append` and `memory_search` (on `index` when given); `clock` decides today's
    file (tests inject it)."""
    return [MemoryAppendTool(clock=clock), MemorySearchTool(index)]
