"""Workspace file tools: confinement (table + property tests) and each tool's behaviour."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.tools.base import ToolContext, ToolError, ToolRegistry
from agents.tools.disk_room import keep_free
from agents.tools.file_io import list_entries, read_text, workspace_parts
from agents.tools.files import (
    EditFileTool,
    ListDirTool,
    ReadFileTool,
    WriteFileTool,
    file_tools,
)


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with links in and out, and an outside directory holding a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    ws = tmp_path / "ws"
    (ws / "sub" / "deep").mkdir(parents=True)
    (ws / "notes.md").write_text("hello\n")
    (ws / "sub" / "a.txt").write_text("a\n")
    (ws / "link_out").symlink_to(outside)
    (ws / "file_out").symlink_to(outside / "secret.txt")
    (ws / "dangling_out").symlink_to(outside / "new.txt")
    (ws / "sub" / "up_out").symlink_to("../../outside")
    (ws / "link_in").symlink_to(ws / "sub")
    (ws / "rel_in").symlink_to("sub/a.txt")
    return ws, outside


def ctx_for(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="agent:main:test")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("notes.md", ("notes.md",)),
        ("./notes.md", ("notes.md",)),
        (".", ()),
        ("sub/deep", ("sub", "deep")),
        ("sub//a.txt", ("sub", "a.txt")),
        ("new/dir/file.txt", ("new", "dir", "file.txt")),
        ("~/x", ("~", "x")),
    ],
)
def test_plain_relative_paths_become_their_components(path: str, expected: tuple[str]) -> None:
    assert workspace_parts(path)[0] == expected


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("//etc/passwd", "absolute"),
        ("..", "'..'"),
        ("../outside/secret.txt", "'..'"),
        ("sub/../../outside", "'..'"),
        ("sub/..", "'..'"),
        ("notes\x00.md", "NUL"),
    ],
)
def test_paths_that_could_leave_the_workspace_are_refused_before_any_open(
    path: str, fragment: str
) -> None:
    with pytest.raises(ToolError, match=fragment):
        workspace_parts(path)


@pytest.mark.parametrize(
    "path",
    [
        "link_out/secret.txt",
        "link_out",
        "file_out",
        "dangling_out",
        "sub/up_out/secret.txt",
        "link_out/newdir/new.txt",
        "link_in/a.txt",
        "rel_in",
    ],
)
async def test_no_symlink_is_followed_not_even_one_that_stays_inside(
    layout: tuple[Path, Path], path: str
) -> None:
    ws, _ = layout
    with pytest.raises(ToolError, match="symlink"):
        await ReadFileTool().run({"path": path}, ctx_for(ws))


def test_a_non_string_path_is_refused() -> None:
    with pytest.raises(ToolError, match="string"):
        workspace_parts(42)  # type: ignore[arg-type]


_components = st.sampled_from(
    [
        "..",
        ".",
        "",
        "sub",
        "deep",
        "link_out",
        "file_out",
        "dangling_out",
        "up_out",
        "link_in",
        "rel_in",
        "notes.md",
        "x",
        "~",
        "secret.txt",
        "a.txt",
    ]
)


def _read_or_list(ws: Path, path: str) -> str:
    """What read_file or list_dir would show for `path` ("" when refused)."""
    try:
        parts, shown = workspace_parts(path)
        try:
            return read_text(ws, parts, shown, 10_000)
        except ToolError:
            return list_entries(ws, parts, shown, 100)
    except ToolError:
        return ""


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_components, max_size=6), absolute=st.booleans())
def test_no_generated_path_reads_anything_outside_the_workspace(
    layout: tuple[Path, Path], parts: list[str], absolute: bool
) -> None:
    ws, _ = layout
    shown = _read_or_list(ws, ("/" if absolute else "") + "/".join(parts))
    assert "top secret" not in shown and not re.search(r"secret\.txt  \(\d", shown)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(max_size=30))
def test_arbitrary_text_paths_never_escape(layout: tuple[Path, Path], path: str) -> None:
    ws, _ = layout
    shown = _read_or_list(ws, path)
    assert "top secret" not in shown and not re.search(r"secret\.txt  \(\d", shown)


async def test_read_file_returns_content_and_pages_by_lines(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    tool = ReadFileTool()
    full = await tool.run({"path": "f.txt"}, ctx_for(tmp_path))
    assert full.content == "".join(f"line {i}\n" for i in range(1, 11))
    page = await tool.run({"path": "f.txt", "offset": 3, "limit": 2}, ctx_for(tmp_path))
    assert page.content.startswith("line 3\nline 4\n")
    assert "6 more lines" in page.content and "offset=5" in page.content


async def test_read_file_refuses_binary_oversized_and_missing_files(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\x7fELF\x00\x01\x02")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "big.txt").write_text("x" * 2_000)
    tool = ReadFileTool(max_bytes=1_000)
    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match="binary"):
        await tool.run({"path": "bin.dat"}, ctx)
    with pytest.raises(ToolError, match="not UTF-8"):
        await tool.run({"path": "latin1.txt"}, ctx)
    with pytest.raises(ToolError, match=r"2,000 bytes, over the 1,000-byte cap"):
        await tool.run({"path": "big.txt"}, ctx)
    with pytest.raises(ToolError, match="no such file"):
        await tool.run({"path": "nope.txt"}, ctx)
    with pytest.raises(ToolError, match="directory"):
        await tool.run({"path": "."}, ctx)


async def test_read_file_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ToolError, match="not a regular file"):
        await ReadFileTool().run({"path": "pipe"}, ctx_for(tmp_path))


async def test_read_file_through_symlink_out_is_refused(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(ToolError, match="symlink"):
        await ReadFileTool().run({"path": "file_out"}, ctx_for(ws))


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        (ReadFileTool(), {}, "missing required argument 'path'"),
        (ReadFileTool(), {"path": 3}, "'path' must be a string"),
        (ReadFileTool(), {"path": "a", "offset": "2"}, "'offset' must be an integer"),
        (ReadFileTool(), {"path": "a", "limit": True}, "'limit' must be an integer"),
        (ReadFileTool(), {"path": "a", "offset": 0}, "'offset' must be >= 1"),
        (WriteFileTool(), {"path": "a"}, "missing required argument 'content'"),
        (WriteFileTool(), {"path": "a", "content": ["x"]}, "'content' must be a string"),
        (EditFileTool(), {"path": "a", "old_text": "x"}, "'new_text'"),
        (ListDirTool(), {"path": None}, "missing required argument 'path'"),
    ],
)
async def test_bad_arguments_raise_tool_errors_naming_the_argument(
    tmp_path: Path, tool: Any, args: dict[str, Any], fragment: str
) -> None:
    (tmp_path / "a").write_text("x\n")
    with pytest.raises(ToolError, match=fragment):
        await tool.run(args, ctx_for(tmp_path))


async def test_write_file_creates_parents_and_replaces_content(tmp_path: Path) -> None:
    tool = WriteFileTool()
    result = await tool.run({"path": "a/b/c.md", "content": "héllo"}, ctx_for(tmp_path))
    assert result.content == "Wrote 6 bytes to a/b/c.md"
    assert (tmp_path / "a/b/c.md").read_text() == "héllo"
    await tool.run({"path": "a/b/c.md", "content": "second"}, ctx_for(tmp_path))
    assert (tmp_path / "a/b/c.md").read_text() == "second"
    assert sorted(p.name for p in (tmp_path / "a/b").iterdir()) == ["c.md"]


async def test_write_file_keeps_the_existing_file_mode(tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("echo 1\n")
    (tmp_path / "run.sh").chmod(0o755)
    await WriteFileTool().run({"path": "run.sh", "content": "echo 2\n"}, ctx_for(tmp_path))
    assert (tmp_path / "run.sh").stat().st_mode & 0o777 == 0o755


async def test_write_file_never_writes_through_a_symlink_out(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    for path in ("file_out", "dangling_out", "link_out/evil.txt", "sub/up_out/x.txt"):
        with pytest.raises(ToolError, match="symlink"):
            await WriteFileTool().run({"path": path, "content": "pwned"}, ctx_for(ws))
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_write_file_refuses_directories_and_file_parents(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ToolError, match="is a directory"):
        await WriteFileTool().run({"path": "d", "content": "x"}, ctx_for(tmp_path))
    with pytest.raises(ToolError, match="parent of this path is a file"):
        await WriteFileTool().run({"path": "f/g.txt", "content": "x"}, ctx_for(tmp_path))
    with pytest.raises(ToolError, match="workspace itself"):
        await WriteFileTool().run({"path": ".", "content": "x"}, ctx_for(tmp_path))


async def test_write_file_refuses_content_over_the_cap(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="over the 10-byte cap"):
        await WriteFileTool(max_bytes=10).run({"path": "x", "content": "y" * 11}, ctx_for(tmp_path))
    assert not (tmp_path / "x").exists()


async def test_writes_stop_short_of_filling_the_disk(tmp_path: Path) -> None:
    # A model writing file after file (each under the cap) must not fill the disk that the
    # history and logs live on: as if only the kept-free floor were left, nothing is written.
    (tmp_path / "f.md").write_text("alpha\n")
    floor = shutil.disk_usage(tmp_path).free + 2**20
    attempts: list[tuple[Any, dict[str, str]]] = [
        (WriteFileTool(keep_free=floor), {"path": "x", "content": "y" * 4096}),
        (EditFileTool(keep_free=floor), {"path": "f.md", "old_text": "alpha", "new_text": "b"}),
    ]
    for tool, args in attempts:
        with pytest.raises(ToolError, match=r"MB free.*Nothing was written"):
            await tool.run(args, ctx_for(tmp_path))
    assert not (tmp_path / "x").exists() and (tmp_path / "f.md").read_text() == "alpha\n"
    await WriteFileTool(keep_free=0).run({"path": "x", "content": "y"}, ctx_for(tmp_path))
    assert (tmp_path / "x").read_text() == "y"


def test_the_kept_free_floor_is_256_mib_or_5_percent_of_a_small_disk() -> None:
    assert keep_free(100 * 2**30) == 256 * 2**20
    assert keep_free(2**30) == int(0.05 * 2**30)


async def test_edit_file_replaces_a_unique_occurrence(tmp_path: Path) -> None:
    (tmp_path / "f.md").write_text("alpha\nbeta\ngamma\n")
    result = await EditFileTool().run(
        {"path": "f.md", "old_text": "beta\n", "new_text": "BETA\nbeta2\n"}, ctx_for(tmp_path)
    )
    assert "replaced 1 occurrence" in result.content
    assert (tmp_path / "f.md").read_text() == "alpha\nBETA\nbeta2\ngamma\n"


async def test_edit_file_explains_missing_and_ambiguous_matches(tmp_path: Path) -> None:
    (tmp_path / "f.md").write_text("x = 1\nx = 1\n")
    tool = EditFileTool()
    ctx = ctx_for(tmp_path)
    with pytest.raises(ToolError, match=r"not found in f\.md"):
        await tool.run({"path": "f.md", "old_text": "y = 1", "new_text": ""}, ctx)
    with pytest.raises(ToolError, match=r"occurs 2 times in f\.md"):
        await tool.run({"path": "f.md", "old_text": "x = 1", "new_text": ""}, ctx)
    with pytest.raises(ToolError, match="old_text is empty"):
        await tool.run({"path": "f.md", "old_text": "", "new_text": "z"}, ctx)
    assert (tmp_path / "f.md").read_text() == "x = 1\nx = 1\n"


async def test_list_dir_shows_dirs_sizes_and_links(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    listing = (await ListDirTool().run({}, ctx_for(ws))).content.splitlines()
    assert "sub/" in listing
    assert "notes.md  (6 bytes)" in listing
    assert any(line.startswith("link_out -> ") for line in listing)
    sub = (await ListDirTool().run({"path": "sub"}, ctx_for(ws))).content
    assert "a.txt  (2 bytes)" in sub and "deep/" in sub


async def test_list_dir_caps_the_number_of_entries(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / f"f{i:02}").write_text("")
    listing = (await ListDirTool(max_entries=5).run({}, ctx_for(tmp_path))).content
    lines = listing.splitlines()
    assert lines[:5] == [f"f{i:02}  (0 bytes)" for i in range(5)]
    assert lines[5] == "[... 7 more entries not shown]"


async def test_list_dir_refuses_links_out_and_files(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(ToolError, match="symlink"):
        await ListDirTool().run({"path": "link_out"}, ctx_for(ws))
    with pytest.raises(ToolError, match="is a file"):
        await ListDirTool().run({"path": "notes.md"}, ctx_for(ws))


def test_file_tools_register_with_valid_schemas() -> None:
    registry = ToolRegistry(file_tools())
    assert registry.names == ["read_file", "write_file", "edit_file", "list_dir"]
    for schema in registry.schemas():
        spec = schema["input_schema"]
        assert spec["type"] == "object"
        assert set(spec["required"]) <= set(spec["properties"])
        assert all(p.get("description") for p in spec["properties"].values())
