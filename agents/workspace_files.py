"""The one way Perch opens a workspace file: beneath the workspace, never through a link.

Everything that reads or writes a workspace file (the file, memory and media tools, the
prompt builder, the heartbeat, seeding, the media inbox) goes through this module. A path is
a tuple of plain components, opened from a descriptor of the workspace: in one
`openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` call where the kernel
has it (Linux 5.6+), else component by component with `O_NOFOLLOW | O_DIRECTORY` from the
previous descriptor. A symlink anywhere on the way fails (ELOOP) instead of being followed,
and nothing is checked by name and then used by name again: every later step works on the
descriptors the open returned. A regular file with several hard links is refused where its
content is read or appended to (a link could name any file of the daemon's user): such
refusals raise `RefusedFile`, and `note_refused` logs one once per path. New files are
written aside (an unnamed `O_TMPFILE`, else a temporary name) and linked into place, so no
reader ever sees half of one and nothing is ever overwritten that should not be.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import secrets
import stat
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_SYS_OPENAT2 = 437  # the same number on every architecture (unified syscall table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_MODE = 0o644  # before the umask (the daemon's 077 makes it 0600)
_NOTED_MAX = 1000


class RefusedFile(OSError):
    """A workspace path that must not be used: `why` says what it is ("is a symbolic
    link", "has 2 hard links", "is not a regular file")."""

    def __init__(self, why: str) -> None:
        super().__init__(errno.EPERM, why)
        self.why = why


class TakenByLink(RefusedFile):
    """`create_new` found a symlink where the new file would go (it was left alone)."""

    def __init__(self) -> None:
        super().__init__("is a symbolic link")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """The openat2 syscall through libc's syscall(), or unavailable."""

    def __init__(self) -> None:
        self.available = False
        self._syscall: object = None
        if sys.platform.startswith("linux"):
            try:
                self._syscall = ctypes.CDLL(None, use_errno=True).syscall
                self.available = True
            except (OSError, AttributeError):
                self.available = False

    def open(self, dir_fd: int, path: str, flags: int, mode: int = 0) -> int:
        if not flags & os.O_CREAT:
            mode = 0  # openat2 rejects a mode without O_CREAT
        how = _OpenHow(flags, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        call = self._syscall
        assert callable(call)
        fd = int(
            call(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(path)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
                self.available = False  # old kernel or a seccomp filter: walk from now on
                raise NotImplementedError
            raise OSError(err, os.strerror(err), path)
        return fd


_OPENAT2 = _Openat2()
_noted: set[str] = set()


def openat2_available() -> bool:
    return _OPENAT2.available


def note_refused(shown: str, why: str) -> None:
    """Log once per path that a workspace file was refused (and not followed)."""
    key = f"{shown}\0{why}"
    if key in _noted:
        return
    if len(_noted) >= _NOTED_MAX:
        _noted.clear()
    _noted.add(key)
    log.warning("workspace file %s %s; refused, not followed", shown, why)


@contextlib.contextmanager
def workspace_root(workspace: Path) -> Iterator[int]:
    """A descriptor of the workspace directory itself (the configured path), closed on exit."""
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _plain(parts: Sequence[str]) -> None:
    """Refuse components that are not plain names (`..`, `.`, empty, with a slash or NUL)."""
    for part in parts:
        if part in ("", ".", "..") or "/" in part or "\0" in part:
            raise RefusedFile("leads outside the workspace")


def open_beneath(root_fd: int, parts: Sequence[str], flags: int, mode: int = FILE_MODE) -> int:
    """Open `parts` below `root_fd` with no symlink in any component; `flags` for the last.

    A symlink on the way raises `RefusedFile("is a symbolic link")`."""
    _plain(parts)
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=root_fd)
    try:
        if _OPENAT2.available:
            with contextlib.suppress(NotImplementedError):
                return _OPENAT2.open(root_fd, "/".join(parts), flags | os.O_CLOEXEC, mode)
        parent = open_dir(root_fd, parts[:-1])
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        finally:
            os.close(parent)
    except OSError as exc:
        raise _as_refusal(exc) from None


def open_dir(root_fd: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A new descriptor for the directory `parts` below `root_fd`, creating missing ones
    (mode 0755 before the umask) if `create`. A symlink raises `RefusedFile`, a file ENOTDIR."""
    _plain(parts)
    try:
        if not create and parts and _OPENAT2.available:
            # ENOTDIR: a file or a symlink somewhere; the walk says which.
            with contextlib.suppress(NotImplementedError, NotADirectoryError):
                return _OPENAT2.open(root_fd, "/".join(parts), DIR_FLAGS)
        return _walk(root_fd, parts, create)
    except OSError as exc:
        raise _as_refusal(exc) from None


def _walk(root_fd: int, parts: Sequence[str], create: bool) -> int:
    fd = os.open(".", DIR_FLAGS, dir_fd=root_fd)
    try:
        for part in parts:
            try:
                nxt = _open_subdir(fd, part)
            except FileNotFoundError:
                if not create:
                    raise
                # FileExistsError: made concurrently; the open below checks what it is.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nxt = _open_subdir(fd, part)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_subdir(fd: int, part: str) -> int:
    try:
        return os.open(part, DIR_FLAGS, dir_fd=fd)
    except NotADirectoryError:  # O_DIRECTORY | O_NOFOLLOW on a symlink says ENOTDIR
        if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
            raise RefusedFile("is a symbolic link") from None
        raise


def _as_refusal(exc: OSError) -> OSError:
    if exc.errno == errno.ELOOP or isinstance(exc, RefusedFile):
        return exc if isinstance(exc, RefusedFile) else RefusedFile("is a symbolic link")
    if exc.errno == errno.EXDEV:  # RESOLVE_BENEATH: an absolute link or a `..` out
        return RefusedFile("leads outside the workspace")
    return exc


def check_regular(fd: int) -> os.stat_result:
    """The file's stat if `fd` is a regular file with one link, else `RefusedFile`."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise RefusedFile("is not a regular file (device, socket or pipe)")
    if st.st_nlink > 1:
        raise RefusedFile(f"has {st.st_nlink} hard links, so it may be a file from elsewhere")
    return st


@contextlib.contextmanager
def opened_regular(
    workspace: Path, parts: Sequence[str], flags: int = os.O_RDONLY
) -> Iterator[tuple[int, os.stat_result]]:
    """The regular, singly linked file at `parts` (descriptor and stat), closed on exit."""
    with workspace_root(workspace) as root:
        fd = open_beneath(root, parts, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        yield fd, check_regular(fd)
    finally:
        os.close(fd)


def read_capped(fd: int, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes from `fd` (one more tells the caller it was longer)."""
    chunks: list[bytes] = []
    left = max_bytes + 1
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_file(workspace: Path, parts: Sequence[str], max_bytes: int) -> bytes | None:
    """The start (up to `max_bytes`) of a workspace file the daemon itself reads (persona
    files, HEARTBEAT.md); None when it is missing or refused (refusals logged once)."""
    shown = str(workspace.joinpath(*parts))
    try:
        with opened_regular(workspace, parts) as (fd, _):
            return read_capped(fd, max_bytes)[:max_bytes]
    except RefusedFile as exc:
        note_refused(shown, exc.why)
    except OSError:
        pass
    return None


def write_atomic(workspace: Path, parts: Sequence[str], data: bytes) -> None:
    """Replace the file at `parts` with `data` (a temporary file renamed over it in its
    no-follow parent; the old file's mode is kept). Parent directories are created."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the workspace itself")
    with workspace_root(workspace) as root:
        parent = open_dir(root, parts[:-1], create=True)
    try:
        name, mode = parts[-1], FILE_MODE
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory")
            if stat.S_ISLNK(st.st_mode):
                raise RefusedFile("is a symbolic link")  # replaced, it would hide the link
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
        tmp = _temporary(parent, name, data, mode)
        try:
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def create_new(workspace: Path, parts: Sequence[str], data: bytes) -> bool:
    """Create the file at `parts` already holding `data`; False (nothing written) when
    that name exists, `TakenByLink` when it is a symlink (a `RefusedFile` when a folder on the
    way is one). Parent directories are created."""
    if not parts:
        raise IsADirectoryError(errno.EISDIR, "the workspace itself")
    with workspace_root(workspace) as root:
        parent = open_dir(root, parts[:-1], create=True)
    try:
        if _link_new(parent, parts[-1], data):
            return True
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode):
                raise TakenByLink
        return False
    finally:
        os.close(parent)


def append(workspace: Path, parts: Sequence[str], data: bytes, *, first: bytes = b"") -> None:
    """Append `data` in one write to the file at `parts`; a missing file is created holding
    `first + data`. Works on the parent's descriptor only: swapping a directory on the way
    for a link during the call makes it fail, never write elsewhere."""
    with workspace_root(workspace) as root:
        parent = open_dir(root, parts[:-1], create=True)
    try:
        for _ in range(3):
            try:
                fd = os.open(
                    parts[-1],
                    os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    dir_fd=parent,
                )
            except FileNotFoundError:
                if _link_new(parent, parts[-1], first + data):
                    return
                continue  # another appender created it first: append to theirs
            except OSError as exc:
                raise _as_refusal(exc) from None
            try:
                check_regular(fd)
                os.write(fd, data)  # one write on O_APPEND: appenders never interleave a line
            finally:
                os.close(fd)
            return
        raise FileExistsError(errno.EEXIST, "created and removed again while appending")
    finally:
        os.close(parent)


def _link_new(parent: int, name: str, data: bytes) -> bool:
    """Write `data` into an unnamed file and link it in as `name`; False if `name` exists."""
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, FILE_MODE, dir_fd=parent)
    except OSError:
        fd = -1  # no O_TMPFILE on this filesystem
    if fd >= 0:
        try:
            _write_all(fd, data)
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=parent, follow_symlinks=True)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EACCES, errno.EPERM):
                raise  # else no /proc to link through: a temporary name instead
        finally:
            os.close(fd)
    tmp = _temporary(parent, name, data, FILE_MODE)
    try:
        os.link(tmp, name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp, dir_fd=parent)
    return True


def _temporary(parent: int, name: str, data: bytes, mode: int) -> str:
    tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=parent)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise
    os.close(fd)
    return tmp


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
