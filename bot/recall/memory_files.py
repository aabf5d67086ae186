"""The memory files as the index sees them: what there is, each file's stamp, its text.

`memory_stamps(workspace)` looks at `MEMORY.md` and `memory/*.md` through the one opener
(`agents.workspace_files`): one `lstat` each, nothing read; `some_stamps` looks at a few
named ones, `folder_stamp` at `memory/` itself (a file added, removed or replaced by a
rename moves it). A file's stamp is its inode, modification time (ns) and size; a symlink,
a file with several hard links (it could be any file of the daemon's user) or anything but
a regular file is left out, as the memory tools leave it. `read_memory` reads one the same
way, at most `MAX_FILE_BYTES`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from agents.workspace_files import (
    check_regular,
    open_beneath,
    open_dir,
    read_capped,
    workspace_root,
)

MAX_FILE_BYTES = 2_000_000
MAX_FILES = 5_000  # memory/*.md looked at; years of daily notes fit
MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"


@dataclass(frozen=True, slots=True)
class MemoryFile:
    path: str  # as shown and indexed: MEMORY.md, memory/2026-05-01.md
    stamp: str
    mtime: float


def _file(path: str, st: os.stat_result) -> MemoryFile | None:
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        return None
    return MemoryFile(path, f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}", st.st_mtime)


def memory_stamps(workspace: Path) -> dict[str, MemoryFile]:
    """Every memory file by its shown path (none when the workspace is missing)."""
    found: dict[str, MemoryFile] = {}
    with contextlib.ExitStack() as stack:
        try:
            root = stack.enter_context(workspace_root(workspace))
        except OSError:
            return found
        with contextlib.suppress(OSError):
            main = _file(MEMORY_FILE, os.stat(MEMORY_FILE, dir_fd=root, follow_symlinks=False))
            if main is not None:
                found[MEMORY_FILE] = main
        try:
            folder = open_dir(root, (MEMORY_DIR,))
        except OSError:
            return found
        stack.callback(os.close, folder)
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_FILES:
                    break
                if not entry.name.endswith(".md"):
                    continue
                with contextlib.suppress(OSError):
                    each = _file(f"{MEMORY_DIR}/{entry.name}", entry.stat(follow_symlinks=False))
                    if each is not None:
                        found[each.path] = each
    return found


def folder_stamp(workspace: Path) -> str:
    """The stamp of `memory/` itself ("" when it is missing or not a folder)."""
    try:
        with workspace_root(workspace) as root:
            st = os.stat(MEMORY_DIR, dir_fd=root, follow_symlinks=False)
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_mtime_ns}" if stat.S_ISDIR(st.st_mode) else ""


def some_stamps(workspace: Path, paths: list[str]) -> dict[str, MemoryFile | None]:
    """The files of `paths` (shown paths) as they are now; None for one gone or refused."""
    found: dict[str, MemoryFile | None] = dict.fromkeys(paths)
    try:
        with workspace_root(workspace) as root:
            for path in paths:
                folder, _, name = path.rpartition("/")
                with contextlib.suppress(OSError):
                    if folder:
                        fd = open_dir(root, (folder,))
                        try:
                            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        finally:
                            os.close(fd)
                    else:
                        st = os.stat(name, dir_fd=root, follow_symlinks=False)
                    found[path] = _file(path, st)
    except OSError:
        pass
    return found


def read_memory(workspace: Path, path: str) -> str | None:
    """A memory file's text (None when it is gone or refused)."""
    try:
        with workspace_root(workspace) as root:
            fd = open_beneath(root, tuple(path.split("/")), os.O_RDONLY | os.O_NONBLOCK)
        try:
            check_regular(fd)
            data = read_capped(fd, MAX_FILE_BYTES)[:MAX_FILE_BYTES]
        finally:
            os.close(fd)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")
