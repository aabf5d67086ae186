"""Process hardening the daemon applies to itself at start.

`private_umask()` sets the umask to 077: the database, logs, status file and everything else
the daemon creates are its user's alone, also outside the systemd unit (which sets `UMask=`).
`make_undumpable()` calls `prctl(PR_SET_DUMPABLE, 0)`: no core dumps, and `/proc/<pid>/`
(environ, mem, maps, ...) of the daemon becomes owned by root, so other processes running as
the same user (a command started by `exec`, for instance) can neither read its environment
and memory nor ptrace it. Linux only; elsewhere, or if the call fails, it returns False.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


PRIVATE_UMASK = 0o077


def private_umask() -> None:
    """Files and folders the daemon creates from now on: owner only."""
    os.umask(PRIVATE_UMASK)


def make_undumpable() -> bool:
    """Mark this process non-dumpable; True if it now is."""
    libc = _libc()
    if libc is None:
        return False
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return False
    return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
