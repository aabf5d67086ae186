"""The file tools' I/O, done relative to an open workspace descriptor (see beneath.py).

Every function takes the workspace and the path's components *after* symlinks inside the
workspace were resolved by `resolve_in_workspace`, so none of them should be a symlink; if one
is (swapped in by a concurrent process), the open fails with ELOOP and the call is refused,
never followed. Regular files with more than one hard link are refused for reading (a link
placed in the workspace could name any file of the daemon's user). Every OS error, a vanished
file included, becomes a `ToolError` the model can read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from agents.tools.base import ToolError
from agents.tools.beneath import open_beneath, open_dir

BINARY_SNIFF_BYTES = 8_192


@contextlib.contextmanager
def workspace_fd(workspace: Path) -> Iterator[int]:
    """An O_DIRECTORY descriptor of the workspace, closed on exit."""
    try:
        fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"workspace {workspace} cannot be opened ({exc.strerror})") from None
    try:
        yield fd
    finally:
        os.close(fd)


def os_problem(exc: OSError, shown: str, action: str) -> ToolError:
    """A readable ToolError for an OSError met while `action`ing `shown`."""
    code = exc.errno
    if code == errno.ENOENT:
        return ToolError(f"{shown}: no such file or directory (use list_dir to see what exists)")
    if code == errno.ELOOP:
        return ToolError(
            f"{shown}: a part of this path was replaced by a symlink during the call; refused"
        )
    if code == errno.ENOTDIR:
        return ToolError(f"{shown}: a parent of this path is a file, not a directory")
    if code == errno.EISDIR:
        return ToolError(f"{shown} is a directory; give a file path")
    if code == errno.EXDEV:
        return ToolError(f"{shown}: the path leaves the workspace; refused")
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
    with workspace_fd(workspace) as root:
        try:
            fd = open_beneath(root, parts, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.EISDIR:
                raise ToolError(f"{shown} is a directory; use list_dir") from None
            raise os_problem(exc, shown, "open") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{shown} is a directory; use list_dir")
        raise ToolError(f"{shown} is not a regular file (device, socket or pipe); refused")
    with os.fdopen(fd, "rb") as fh:
        if st.st_nlink > 1:
            raise ToolError(
                f"{shown} has {st.st_nlink} hard links, so it may be a file from outside the "
                "workspace; refused (copy its content into a new file if it is yours)"
            )
        if st.st_size > max_bytes:
            hint = f"; {too_big}" if too_big else ""
            raise ToolError(
                f"{shown} is {st.st_size:,} bytes, over the {max_bytes:,}-byte cap of {tool}{hint}"
            )
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise os_problem(exc, shown, "read") from None
    if len(data) > max_bytes:
        raise ToolError(f"{shown} grew past the {max_bytes:,}-byte cap of {tool} while read")
    return data


def open_regular(workspace: Path, parts: Sequence[str], shown: str, flags: int) -> int:
    """A descriptor of the regular file at `parts`, opened beneath the workspace without
    following symlinks (`flags` e.g. O_RDONLY or O_WRONLY | O_APPEND); refuses anything that
    is not a regular file with exactly one hard link. The caller closes it."""
    with workspace_fd(workspace) as root:
        try:
            fd = open_beneath(root, parts, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise os_problem(exc, shown, "open") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        os.close(fd)
        why = "is not a regular file" if not stat.S_ISREG(st.st_mode) else "has several hard links"
        raise ToolError(f"{shown} {why}, so it may not be a workspace file; refused")
    return fd


def write_atomic(workspace: Path, parts: Sequence[str], shown: str, data: bytes) -> None:
    """Replace the file with `data` via a temp file and rename in its (no-follow) parent."""
    if not parts:
        raise ToolError("path names the workspace itself; give a file path")
    with workspace_fd(workspace) as root:
        try:
            parent = open_dir(root, parts[:-1], create=True)
        except FileExistsError:
            raise ToolError(f"{shown}: a parent of this path is a file, not a directory") from None
        except OSError as exc:
            raise os_problem(exc, shown, "write") from None
    try:
        _replace_in(parent, parts[-1], data)
    except OSError as exc:
        raise os_problem(exc, shown, "write") from None
    finally:
        os.close(parent)


def _replace_in(parent: int, name: str, data: bytes) -> None:
    mode = 0o644
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if stat.S_ISREG(st.st_mode):
            mode = stat.S_IMODE(st.st_mode)
    tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise


def list_entries(workspace: Path, parts: Sequence[str], shown: str, max_entries: int) -> str:
    """One line per entry: `name/` for directories, sizes for files, targets for symlinks."""
    with workspace_fd(workspace) as root:
        try:
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
                lines.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=dfd)}")
            elif stat.S_ISDIR(st.st_mode):
                lines.append(f"{entry.name}/")
            else:
                lines.append(f"{entry.name}  ({st.st_size:,} bytes)")
        except OSError:
            lines.append(f"{entry.name}  (vanished while listing)")
    if len(entries) > max_entries:
        lines.append(f"[... {len(entries) - max_entries} more entries not shown]")
    return "\n".join(lines)
