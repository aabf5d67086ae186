"""Memory tools: daily-file appends with an injected clock, and ANDed case-insensitive search."""

from __future__ import annotations

import asyncio
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from agents.tools.base import ToolContext, ToolError, ToolRegistry
from agents.tools.memory import MemoryAppendTool, MemorySearchTool, memory_tools

TZ = timezone(timedelta(hours=2))


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def ctx_for(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="agent:main:test")


async def test_append_creates_the_daily_file_with_a_heading_and_timestamped_bullets(
    tmp_path: Path,
) -> None:
    clock = FakeClock(datetime(2026, 3, 14, 9, 5, tzinfo=TZ))
    tool = MemoryAppendTool(clock=clock)
    result = await tool.run({"text": "Owner prefers tea"}, ctx_for(tmp_path))
    assert result.content == "Saved to memory/2026-03-14.md"
    clock.now = datetime(2026, 3, 14, 17, 42, tzinfo=TZ)
    await tool.run({"text": "  Dentist moved\nto Friday 10:00  "}, ctx_for(tmp_path))
    assert (tmp_path / "memory/2026-03-14.md").read_text() == (
        "# 2026-03-14\n\n- 09:05 Owner prefers tea\n- 17:42 Dentist moved\n  to Friday 10:00\n"
    )


async def test_append_uses_the_clocks_local_date_for_the_file(tmp_path: Path) -> None:
    # 23:30 local on the 14th is already the 15th in UTC: the local date wins.
    clock = FakeClock(datetime(2026, 3, 14, 23, 30, tzinfo=timezone(timedelta(hours=-5))))
    await MemoryAppendTool(clock=clock).run({"text": "late note"}, ctx_for(tmp_path))
    assert (tmp_path / "memory/2026-03-14.md").exists()


async def test_append_stops_short_of_filling_the_disk(tmp_path: Path) -> None:
    floor = shutil.disk_usage(tmp_path).free + 2**20  # as if only the kept-free floor were left
    clock = FakeClock(datetime(2026, 1, 2, 8, 0, tzinfo=TZ))
    with pytest.raises(ToolError, match=r"MB free.*Nothing was written"):
        await MemoryAppendTool(clock=clock, keep_free=floor).run({"text": "x"}, ctx_for(tmp_path))
    assert not (tmp_path / "memory").exists()


async def test_concurrent_appends_keep_every_line_whole(tmp_path: Path) -> None:
    tool = MemoryAppendTool(clock=FakeClock(datetime(2026, 1, 2, 8, 0, tzinfo=TZ)))
    await asyncio.gather(*(tool.run({"text": f"note {i}"}, ctx_for(tmp_path)) for i in range(40)))
    lines = (tmp_path / "memory/2026-01-02.md").read_text().splitlines()
    assert lines[:2] == ["# 2026-01-02", ""]
    assert sorted(lines[2:]) == sorted(f"- 08:00 note {i}" for i in range(40))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "missing required argument 'text'"),
        ({"text": 5}, "'text' must be a string"),
        ({"text": "   "}, "'text' is empty"),
        ({"text": "x" * 5000}, "over the 4,000 cap"),
    ],
)
async def test_append_rejects_bad_text(
    tmp_path: Path, args: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ToolError, match=fragment):
        await MemoryAppendTool().run(args, ctx_for(tmp_path))


async def test_append_refuses_a_memory_dir_symlinked_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "memory").symlink_to(outside)
    with pytest.raises(ToolError, match="symlink"):
        await MemoryAppendTool().run({"text": "x"}, ctx_for(ws))
    assert list(outside.iterdir()) == []


def _write(path: Path, text: str, mtime: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (mtime, mtime))


@pytest.fixture
def memory_ws(tmp_path: Path) -> Path:
    _write(
        tmp_path / "MEMORY.md", "# Memory\n- Owner's cat is called Miso\n- Likes GREEN tea\n", 100
    )
    _write(tmp_path / "memory/2026-01-01.md", "# 2026-01-01\n- 10:00 bought green tea\n", 1_000)
    _write(tmp_path / "memory/2026-01-03.md", "# 2026-01-03\n- 11:00 green tea ran out\n", 3_000)
    _write(tmp_path / "memory/2026-01-02.md", "# 2026-01-02\n- 09:00 tea with Ana\n", 2_000)
    _write(tmp_path / "memory/notes.txt", "green tea (not markdown, not searched)\n", 5_000)
    _write(tmp_path / "notes.md", "green tea (outside memory, not searched)\n", 5_000)
    return tmp_path


async def test_search_ands_terms_case_insensitively_memory_md_first_then_newest(
    memory_ws: Path,
) -> None:
    result = await MemorySearchTool().run({"query": "Tea green"}, ctx_for(memory_ws))
    assert result.content.splitlines() == [
        "MEMORY.md:3: - Likes GREEN tea",
        "memory/2026-01-03.md:2: - 11:00 green tea ran out",
        "memory/2026-01-01.md:2: - 10:00 bought green tea",
    ]


async def test_search_caps_results_and_says_how_many_were_left(memory_ws: Path) -> None:
    result = await MemorySearchTool().run({"query": "tea", "limit": 2}, ctx_for(memory_ws))
    lines = result.content.splitlines()
    assert lines[:2] == [
        "MEMORY.md:3: - Likes GREEN tea",
        "memory/2026-01-03.md:2: - 11:00 green tea ran out",
    ]
    assert lines[2] == "[... 2 more matches; narrow the query]"


async def test_search_reports_no_matches_and_works_without_memory_files(tmp_path: Path) -> None:
    result = await MemorySearchTool().run({"query": "Miso dog"}, ctx_for(tmp_path))
    assert result.content == "No memory lines contain all of: miso dog"
    assert not result.is_error


async def test_search_skips_memory_files_linked_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret green tea\n")
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory/leak.md").symlink_to(outside)
    (ws / "MEMORY.md").symlink_to(outside)
    result = await MemorySearchTool().run({"query": "secret"}, ctx_for(ws))
    assert result.content.startswith("No memory lines")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "missing required argument 'query'"),
        ({"query": ["tea"]}, "'query' must be a string"),
        ({"query": "tea", "limit": "3"}, "'limit' must be an integer"),
        ({"query": "tea", "limit": 0}, "between 1 and 50"),
        ({"query": "tea", "limit": 51}, "between 1 and 50"),
    ],
)
async def test_search_rejects_bad_arguments(
    tmp_path: Path, args: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ToolError, match=fragment):
        await MemorySearchTool().run(args, ctx_for(tmp_path))


async def test_appended_notes_are_found_by_search(tmp_path: Path) -> None:
    tools = ToolRegistry(memory_tools(clock=FakeClock(datetime(2026, 5, 1, 12, 0, tzinfo=TZ))))
    assert tools.names == ["memory_append", "memory_search"]
    append, search = tools.get("memory_append"), tools.get("memory_search")
    assert append is not None and search is not None
    await append.run({"text": "Passport expires in June 2027"}, ctx_for(tmp_path))
    found = await search.run({"query": "passport june"}, ctx_for(tmp_path))
    assert found.content == "memory/2026-05-01.md:3: - 12:00 Passport expires in June 2027"


async def test_a_hard_link_in_memory_is_neither_searched_nor_appended_to(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    outside = tmp_path / "secret.txt"
    outside.write_text("db password hunter2\n")
    os.link(outside, ws / "memory/2026-01-02.md")
    os.link(outside, ws / "MEMORY.md")
    found = await MemorySearchTool().run({"query": "hunter2"}, ctx_for(ws))
    assert "password" not in found.content  # the linked line is never shown
    tool = MemoryAppendTool(clock=FakeClock(datetime(2026, 1, 2, 8, 0, tzinfo=TZ)))
    with pytest.raises(ToolError, match="hard links"):
        await tool.run({"text": "appended by a hostile model"}, ctx_for(ws))
    assert outside.read_text() == "db password hunter2\n"
