"""The file tools' side of the one opener (`agents.workspace_files`): paths and tool errors.

`workspace_parts(path)` turns what the model wrote into plain components (no absolute path,
no `..`, no NUL), and every read or write then goes through `agents.workspace_files`, which
opens beneath the workspace descriptor without following any symlink. Regular files with more
than one hard link are refused for reading and editing (a link placed in the workspace could
name any file of the daemon's user). Every OS error, a symlink or a vanished file included,
becomes a `ToolError` the model can read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from agents.tools.base import ToolError
from agents.workspace_files import (
    RefusedFile,
    note_refused,
    open_dir,
    opened_regular,
    read_capped,
    workspace_root,
)
from agents.workspace_files import write_atomic as _write_atomic

BINARY_SNIFF_BYTES = 8_192


def workspace_parts(path: str) -> tuple[tuple[str, ...], str]:
    """The components of a relative workspace path and how to show it, or ToolError.

    Refused: non-strings, empty paths, NUL bytes, absolute paths and any `..` component.
    Symlinks are not looked at here: the open refuses them (they are never followed)."""
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if path == "":
        raise ToolError("path is empty: give a path relative to the workspace, e.g. 'notes.md'")
    if "\x00" in path:
        raise ToolError("path contains a NUL byte; give a plain relative path")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ToolError(
            f"path {path!r} is absolute; give a path relative to the workspace (e.g. 'notes.md')"
        )
    if ".." in pure.parts:
        raise ToolError(f"path {path!r} contains '..'; paths must stay inside the workspace")
    parts = tuple(part for part in pure.parts if part != ".")
    return parts, "/".join(parts) or "."


def refuse_private(parts: Sequence[str], shown: str, private: Sequence[str]) -> None:
    """ToolError when `parts` names (or lies under) one of the run's `private` entries."""
    if parts and parts[0] in private:
        raise ToolError(
            f"{shown} belongs to the owner's memory; it cannot be read or changed from this "
            "conversation"
        )


def os_problem(exc: OSError, shown: str, action: str) -> ToolError:
    """A readable ToolError for an OSError met while `action`ing `shown`."""
    if isinstance(exc, RefusedFile):
        note_refused(shown, exc.why)  # once per path in the log; every time for the model
        if exc.why == "is a symbolic link":
            return ToolError(
                f"{shown} is, or passes through, a symlink; symlinks in the workspace are not "
                "followed (give the path of the real file or directory)"
            )
        return ToolError(f"{shown} {exc.why}; refused")
    code = exc.errno
    if code == errno.ENOENT:
        return ToolError(f"{shown}: no such file or directory (use list_dir to see what exists)")
    if code == errno.ENOTDIR:
        return ToolError(f"{shown}: a parent of this path is a file, not a directory")
    if code == errno.EISDIR:
        return ToolError(f"{shown} is a directory; give a file path")
    if code == errno.EEXIST:
        return ToolError(f"{shown}: a parent of this path is a file, not a directory")
    return ToolError(f"{shown}: cannot {action} ({exc.strerror})")


def read_text(workspace: Path, parts: Sequence[str], shown: str, max_bytes: int) -> str:
    """The file's text; refuses non-regular, hard-linked, oversized, binary, non-UTF-8 files."""
    data = read_bytes(
        workspace,
        parts,
        shown,
        max_bytes,
        too_big="look at it with exec (head, grep) if exec is enabled",
        tool="read_file",
    )
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ToolError(f"{shown} looks like a binary file; read_file only reads text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; read_file only reads text") from None


def read_bytes(
    workspace: Path,
    parts: Sequence[str],
    shown: str,
    max_bytes: int,
    *,
    too_big: str = "",
    tool: str = "this tool",
) -> bytes:
    """The file's bytes, opened beneath the workspace without following symlinks; refuses
    non-regular, hard-linked and oversized files (`too_big` says what to do instead)."""
    try:
        with opened_regular(workspace, parts) as (fd, st):
            if st.st_size > max_bytes:
                hint = f"; {too_big}" if too_big else ""
                raise ToolError(
                    f"{shown} is {st.st_size:,} bytes, over the {max_bytes:,}-byte cap of "
                    f"{tool}{hint}"
                )
            data = read_capped(fd, max_bytes)
    except IsADirectoryError:
        raise ToolError(f"{shown} is a directory; use list_dir") from None
    except OSError as exc:
        raise os_problem(exc, shown, "read") from None
    if len(data) > max_bytes:
        raise ToolError(f"{shown} grew past the {max_bytes:,}-byte cap of {tool} while read")
    return data


def write_atomic(workspace: Path, parts: Sequence[str], shown: str, data: bytes) -> None:
    """Replace the file with `data` via a temp file and rename in its (no-follow) parent."""
    if not parts:
        raise ToolError("path names the workspace itself; give a file path")
    try:
        _write_atomic(workspace, parts, data)
    except FileExistsError:
        raise ToolError(f"{shown}: a parent of this path is a file, not a directory") from None
    except OSError as exc:
        raise os_problem(exc, shown, "write") from None


def list_entries(workspace: Path, parts: Sequence[str], shown: str, max_entries: int) -> str:
    """One line per entry: `name/` for directories, sizes for files, targets for symlinks."""
    try:
        with workspace_root(workspace) as root:
            dfd = open_dir(root, parts)
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            raise ToolError(f"{shown} is a file, not a directory; use read_file") from None
        raise os_problem(exc, shown, "list") from None
    try:
        with os.scandir(dfd) as it:
            entries = sorted(it, key=lambda e: e.name)
        return _render(entries, dfd, shown, max_entries)
    except OSError as exc:
        raise os_problem(exc, shown, "list") from None
    finally:
        os.close(dfd)


def _render(entries: list[os.DirEntry[str]], dfd: int, shown: str, max_entries: int) -> str:
    if not entries:
        return f"{shown} is empty"
    lines = []
    for entry in entries[:max_entries]:
        try:
            st = os.stat(entry.name, dir_fd=dfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(entry.name, dir_fd=dfd)
                lines.append(f"{entry.name} -> {target}  (symlink: not followed by the tools)")
            elif stat.S_ISDIR(st.st_mode):
                lines.append(f"{entry.name}/")
            else:
                lines.append(f"{entry.name}  ({st.st_size:,} bytes)")
        except OSError:
            lines.append(f"{entry.name}  (vanished while listing)")
    if len(entries) > max_entries:
        lines.append(f"[... {len(entries) - max_entries} more entries not shown]")
    return "\n".join(lines)
