"""File tools against a hostile workspace: hard links, symlink loops, vanished files, and a
thread swapping a directory for a symlink to the outside while calls run (with `openat2` and
with the per-component O_NOFOLLOW walk)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents import workspace_files
from agents.tools.base import ToolContext, ToolError
from agents.tools.files import EditFileTool, ListDirTool, ReadFileTool, WriteFileTool


def ctx_for(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, session_key="agent:main:test")


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with openat2 (where the kernel has it) and with the O_NOFOLLOW walk."""
    if request.param == "walk":
        monkeypatch.setattr(workspace_files._OPENAT2, "available", False)
    elif not workspace_files.openat2_available():
        pytest.skip("openat2 is not available on this kernel; the walk variant still runs")
    return str(request.param)


@pytest.fixture
def spaces(tmp_path: Path) -> tuple[Path, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE secret\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws, outside


async def test_hardlinked_file_is_neither_read_nor_edited(
    spaces: tuple[Path, Path], resolver: str
) -> None:
    ws, outside = spaces
    os.link(outside / "secret.txt", ws / "innocent.txt")
    with pytest.raises(ToolError, match="2 hard links"):
        await ReadFileTool().run({"path": "innocent.txt"}, ctx_for(ws))
    with pytest.raises(ToolError, match="hard links"):
        args = {"path": "innocent.txt", "old_text": "secret", "new_text": "owned"}
        await EditFileTool().run(args, ctx_for(ws))
    # Overwriting replaces the workspace's name only; the linked file keeps its content.
    await WriteFileTool().run({"path": "innocent.txt", "content": "mine"}, ctx_for(ws))
    assert (outside / "secret.txt").read_text() == "OUTSIDE secret\n"
    assert (ws / "innocent.txt").read_text() == "mine"


async def test_symlink_loops_are_tool_errors(spaces: tuple[Path, Path], resolver: str) -> None:
    ws, _ = spaces
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    (ws / "self").symlink_to("self")
    for tool, args in [
        (ReadFileTool(), {"path": "a"}),
        (ReadFileTool(), {"path": "self/x"}),
        (ListDirTool(), {"path": "b"}),
        (WriteFileTool(), {"path": "a/new.txt", "content": "x"}),
        (EditFileTool(), {"path": "self", "old_text": "x", "new_text": "y"}),
    ]:
        with pytest.raises(ToolError, match="symlink"):
            await tool.run(args, ctx_for(ws))


async def test_vanished_targets_are_tool_errors(spaces: tuple[Path, Path], resolver: str) -> None:
    ws, _ = spaces
    (ws / "gone").symlink_to("nothing-here")
    with pytest.raises(ToolError, match="symlink"):
        await ReadFileTool().run({"path": "gone"}, ctx_for(ws))
    with pytest.raises(ToolError, match="no such file"):
        await ListDirTool().run({"path": "nothing-here"}, ctx_for(ws))


@contextlib.contextmanager
def swapping(ws: Path, outside: Path) -> Iterator[list[int]]:
    """A thread that keeps swapping ws/d between a real directory and a symlink to outside."""
    stop = threading.Event()
    swaps = [0]

    def clear_d() -> None:
        # write_file may have created a fresh ws/d while it was missing: that one is inside.
        with contextlib.suppress(OSError):
            if (ws / "d").is_symlink():
                os.unlink(ws / "d")
            else:
                shutil.rmtree(ws / "d", ignore_errors=True)

    def swap() -> None:
        while not stop.is_set():
            os.rename(ws / "d", ws / "d.real")
            with contextlib.suppress(FileExistsError):
                os.symlink(outside, ws / "d")
            while True:
                clear_d()
                try:
                    os.rename(ws / "d.real", ws / "d")
                    break
                except OSError:
                    continue  # a write made ws/d again in between
            swaps[0] += 1

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join(timeout=10)


async def test_a_racing_directory_swap_never_leads_outside(
    spaces: tuple[Path, Path], resolver: str
) -> None:
    ws, outside = spaces
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_text("inside\n")
    seen: list[str] = []
    refused = 0
    with swapping(ws, outside) as swaps:
        for i in range(400):
            calls = [
                (ReadFileTool(), {"path": "d/secret.txt"}),
                (ListDirTool(), {"path": "d"}),
                (WriteFileTool(), {"path": f"d/w{i}.txt", "content": "written"}),
                (EditFileTool(), {"path": "d/secret.txt", "old_text": "in", "new_text": "in"}),
            ]
            for tool, args in calls:
                try:
                    seen.append((await tool.run(args, ctx_for(ws))).content)
                except ToolError:
                    refused += 1
            await asyncio.sleep(0)
    assert swaps[0] > 0
    assert seen, "every call was refused; the race test exercised nothing"
    assert not any("OUTSIDE" in text for text in seen)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "OUTSIDE secret\n"
