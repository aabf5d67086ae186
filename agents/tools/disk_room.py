"""Room on the disk: a tool's write never takes the workspace's filesystem below a floor.

The workspace usually shares its disk with Perch's database and logs. Each `write_file` is
capped, but a runaway or hostile model writing file after file would fill the disk, and on a
full disk the next turn's history cannot be saved. `ensure_room(workspace, adding)` raises
`ToolError` when writing `adding` more bytes would leave less than `keep_free(total)`: 256 MiB,
or 5% of a smaller filesystem. Tools that write (`write_file`, `edit_file`, `memory_append`)
ask before each write. `exec` cannot be asked per write: `headroom(workspace)` caps the size
any one file of a command may reach (`RLIMIT_FSIZE`), so near the floor a command cannot
write past it (deleting files still works), and exec watches `free_and_floor` while the
command runs, stopping it when the whole command has taken the disk below the floor.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agents.tools.base import ToolError

KEEP_FREE_BYTES = 256 * 1024 * 1024
KEEP_FREE_SHARE = 0.05
_MB = 1024 * 1024


def keep_free(total: int) -> int:
    """The bytes kept free on a filesystem of `total` bytes."""
    return min(KEEP_FREE_BYTES, int(total * KEEP_FREE_SHARE))


def free_and_floor(workspace: Path, keep: int | None) -> tuple[int, int] | None:
    """(bytes free, bytes to keep free) on the workspace's filesystem; None when it cannot
    be asked (the write itself then reports a real problem plainly)."""
    try:
        usage = shutil.disk_usage(workspace)
    except OSError:
        return None
    return usage.free, keep_free(usage.total) if keep is None else keep


def headroom(workspace: Path, keep: int | None = None) -> int | None:
    """Bytes that may still be written on the workspace's filesystem before the floor (0
    when it is reached); None when the filesystem cannot be asked."""
    known = free_and_floor(workspace, keep)
    return None if known is None else max(known[0] - known[1], 0)


def ensure_room(workspace: Path, adding: int, keep: int | None = None) -> None:
    """ToolError if writing `adding` bytes would leave less than `keep` (default
    `keep_free(total)`) free on the filesystem holding `workspace`."""
    known = free_and_floor(workspace, keep)
    if known is None or known[0] - adding >= known[1]:
        return
    free, floor = known
    raise ToolError(
        f"the disk holding the workspace has {free / _MB:,.0f} MB free; writing "
        f"{adding:,} bytes would leave less than the {floor / _MB:,.0f} MB kept free for "
        "Perch's history and logs. Nothing was written: delete files no longer needed, or "
        "tell the user the disk is nearly full"
    )
