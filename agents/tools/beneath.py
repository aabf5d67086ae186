"""Opening paths under a directory descriptor without ever following a symlink.

`open_dir(root_fd, parts)` opens the directory `parts` names below `root_fd`. On kernels with
`openat2` (Linux 5.6+) it is one call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
RESOLVE_NO_MAGICLINKS`; elsewhere (or when a seccomp filter refuses it) each component is
opened in turn relative to the previous one with `O_NOFOLLOW | O_DIRECTORY`. Either way a
component that is (or was swapped for) a symlink fails with ELOOP instead of being followed,
and nothing outside `root_fd` can be reached: callers then work on a single name relative to
the returned descriptor (`dir_fd=`), which is race-free.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import sys
from collections.abc import Sequence

_SYS_OPENAT2 = 437  # the same number on every architecture (unified syscall table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """The openat2 syscall through libc's syscall(), or unavailable."""

    def __init__(self) -> None:
        self.available = False
        self._syscall: object = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                self._syscall = libc.syscall
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


def openat2_available() -> bool:
    return _OPENAT2.available


def open_beneath(root_fd: int, parts: Sequence[str], flags: int, mode: int = 0o644) -> int:
    """Open `parts` below `root_fd` (no symlink in any component); `flags` for the last one."""
    if not parts:
        return os.open(".", flags | os.O_CLOEXEC, dir_fd=root_fd)
    if _OPENAT2.available:
        try:
            return _OPENAT2.open(root_fd, "/".join(parts), flags | os.O_CLOEXEC, mode)
        except NotImplementedError:
            pass
    parent = open_dir(root_fd, parts[:-1])
    try:
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


def open_dir(root_fd: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A new descriptor for the directory `parts` below `root_fd`, creating missing ones
    (mode 0755) if `create`. Raises OSError: ELOOP for a symlink, ENOTDIR for a file."""
    if not create and parts and _OPENAT2.available:
        try:
            return _OPENAT2.open(root_fd, "/".join(parts), DIR_FLAGS)
        except NotImplementedError:
            pass
    fd = os.open(".", DIR_FLAGS, dir_fd=root_fd)
    try:
        for part in parts:
            try:
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                # FileExistsError: made concurrently; the open below checks what it is.
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd
