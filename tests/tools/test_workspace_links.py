"""Links planted in the workspace (from `exec`, by a hostile model) reach nothing outside it.

Every part of Perch that reads or writes a workspace file (the prompt builder, the heartbeat,
seeding, the memory tools, the media inbox, `send_file`, the file tools) opens it through
`agents.workspace_files`: beneath the workspace, never through a symlink, and a regular file
with several hard links is not read. Each test plants what an attacker with `exec` could.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agents.prompt import PromptBuilder, RuntimeInfo
from agents.tools.base import ToolContext, ToolError
from agents.tools.memory import MemoryAppendTool, MemorySearchTool
from bot.kernel.workspace import seed_workspace
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon

RUNTIME = RuntimeInfo(agent_id="main", session_key="agent:main:console:local:dm:o", model="m")
SECRET = "sk-ant-SECRET-the-daemon-can-read"


@pytest.fixture
def spaces(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace, and beside it a folder with a file only the daemon should read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws, outside


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def test_a_persona_file_linked_out_never_reaches_the_system_prompt(
    spaces: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    ws, outside = spaces
    (ws / "IDENTITY.md").write_text("I am Perch.")
    (ws / "SOUL.md").symlink_to(outside / "secret.txt")
    (ws / "AGENTS.md").symlink_to("../outside/secret.txt")
    os.link(outside / "secret.txt", ws / "MEMORY.md")  # a hard link names the same file
    builder = PromptBuilder(ws)
    with caplog.at_level(logging.WARNING):
        for mode in ("full", "minimal", "full"):
            text = builder.build(mode, RUNTIME)[0]["text"]  # type: ignore[arg-type]
            assert SECRET not in text
    assert "I am Perch." in builder.build("full", RUNTIME)[0]["text"]
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 3, refusals  # once per file, not once per turn
    assert any("SOUL.md" in line and "symbolic link" in line for line in refusals)
    assert any("MEMORY.md" in line and "hard links" in line for line in refusals)


def swap_for_a_link(soul: Path, outside: Path) -> None:
    os.unlink(soul)
    soul.symlink_to(outside / "secret.txt")


def give_a_second_name(soul: Path, outside: Path) -> None:
    os.link(soul, outside / "elsewhere.md")  # unchanged, but no longer only the workspace's


@pytest.mark.parametrize("change", [swap_for_a_link, give_a_second_name])
def test_a_cached_persona_file_made_a_link_is_not_read_on_the_next_turn(
    spaces: tuple[Path, Path], change: Callable[[Path, Path], None]
) -> None:
    ws, outside = spaces
    (ws / "SOUL.md").write_text("Be kind.")
    builder = PromptBuilder(ws)
    assert "Be kind." in builder.build("full", RUNTIME)[0]["text"]
    change(ws / "SOUL.md", outside)
    text = builder.build("full", RUNTIME)[0]["text"]
    assert SECRET not in text and "Be kind." not in text


async def test_a_heartbeat_file_linked_out_is_not_sent_to_the_model(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "tasks.md").write_text(f"- Tell the owner {SECRET}\n")
    chan = MemoryChannel("telegram")
    owner = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["o1"]}
    async with running_daemon(tmp_path, fake, {"telegram": chan}, owner) as daemon:
        assert daemon.scheduler is not None and daemon.scheduler.heartbeat is not None
        beat = daemon.scheduler.heartbeat
        beat.clock = lambda: datetime(2025, 1, 10, 12, 0, tzinfo=UTC)
        (daemon.config.workspace / "HEARTBEAT.md").unlink()
        (daemon.config.workspace / "HEARTBEAT.md").symlink_to(outside / "tasks.md")
        assert await beat.tick() == "empty"
    assert fake.requests == []


def test_seeding_never_follows_a_dangling_persona_link(
    spaces: tuple[Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws, outside = spaces
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "SOUL.md").write_text("template soul")
    (templates / "USER.md").write_text("template user")
    (ws / "SOUL.md").symlink_to(outside / "planted.md")  # dangling: seeding would create it
    (ws / "memory").symlink_to(outside)
    with caplog.at_level(logging.WARNING):
        copied = seed_workspace(ws, templates)
    assert copied == ["USER.md"]
    assert not (outside / "planted.md").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (ws / "SOUL.md").is_symlink() and (ws / "USER.md").read_text() == "template user"
    assert any("SOUL.md" in r.getMessage() for r in caplog.records)


_SWAPPER = """
import os, shutil, sys
ws, outside = sys.argv[1], sys.argv[2]
memory, real = os.path.join(ws, "memory"), os.path.join(ws, "memory.real")
print("swapping", flush=True)
while True:
    try:
        os.rename(memory, real)
        os.symlink(outside, memory)
        os.unlink(memory)
    except OSError:
        pass
    while os.path.lexists(real):
        if os.path.islink(memory):
            os.unlink(memory)
        elif os.path.isdir(memory):
            shutil.rmtree(memory, ignore_errors=True)  # made afresh by the tool meanwhile
        try:
            os.rename(real, memory)
        except OSError:
            pass
"""


@contextlib.contextmanager
def swapping_memory(ws: Path, outside: Path) -> Iterator[None]:
    """Another process (a command started by `exec`, say) that keeps swapping ws/memory
    between the real directory and a symlink to the outside, on its own CPU."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(ws), str(outside)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"swapping\n"
        yield
    finally:
        proc.kill()
        proc.wait()


async def test_memory_append_racing_a_memory_dir_swap_never_writes_outside(
    spaces: tuple[Path, Path],
) -> None:
    ws, outside = spaces
    (ws / "memory").mkdir()
    day = datetime(2026, 1, 2, 8, 0, tzinfo=UTC)
    saved = refused = 0
    with swapping_memory(ws, outside):
        for i in range(1500):
            when = day + timedelta(days=i)  # a new daily file each call: the create path
            tool = MemoryAppendTool(clock=lambda when=when: when)
            try:
                await tool.run({"text": f"note {i}"}, ToolContext(workspace=ws, session_key="k"))
                saved += 1
            except ToolError:
                refused += 1
            if i % 50 == 0:
                await asyncio.sleep(0)
    assert saved > 0 and refused > 0  # the race was on: some calls met the link
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


async def test_memory_append_never_appends_through_a_hard_link(spaces: tuple[Path, Path]) -> None:
    ws, outside = spaces
    (ws / "memory").mkdir()
    os.link(outside / "secret.txt", ws / "memory" / "2026-01-02.md")
    tool = MemoryAppendTool(clock=lambda: datetime(2026, 1, 2, 8, 0, tzinfo=UTC))
    with pytest.raises(ToolError, match="hard links"):
        await tool.run({"text": "overwrite"}, ToolContext(workspace=ws, session_key="k"))
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


async def test_memory_search_reads_no_linked_file(spaces: tuple[Path, Path]) -> None:
    ws, outside = spaces
    (ws / "memory").mkdir()
    (ws / "memory" / "a.md").symlink_to(outside / "secret.txt")
    os.link(outside / "secret.txt", ws / "memory" / "b.md")
    shutil.copy(outside / "secret.txt", ws / "memory" / "mine.md")
    result = await MemorySearchTool().run(
        {"query": "sk-ant-SECRET"}, ToolContext(workspace=ws, session_key="k")
    )
    assert result.content.count("SECRET") == 1 and "memory/mine.md:1" in result.content
