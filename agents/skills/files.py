"""The one door to a skill's files: opened beneath its source, never through a symlink.

`open_in_skill(base, parts)` is how every SKILL.md, every file `read_skill` returns and every
folder listed is reached. `base` is the source directory the owner chose (the workspace, a
`skills.paths` folder, the bundled one; it may itself be a symlink, that is the owner's
choice); `parts` are the components below it, and none of them may be a symlink: the open
resolves beneath `base` with the one opener, `agents.workspace_files` (`openat2`
RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or a component-by-component O_NOFOLLOW walk), so a
folder swapped for a link is refused instead of leading out. Files with several hard links are refused where the model
can write (the workspace), as the file tools refuse them.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agents.workspace_files import open_beneath

MAX_LISTED = 60  # entries a folder listing shows


class SkillFileError(Exception):
    """A skill file that cannot be read; the text says why in one line."""


class IsFolder(SkillFileError):
    """The path names a folder, not a file."""


class TooLarge(SkillFileError):
    def __init__(self, shown: str, size: int, cap: int) -> None:
        super().__init__(f"{shown} is {size:,} bytes; at most {cap:,} are read")
        self.size = size


def open_in_skill(base: Path, parts: Sequence[str], flags: int = os.O_RDONLY) -> int:
    """A descriptor for `parts` beneath `base`, no symlink followed in any of them."""
    root = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return open_beneath(root, parts, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
    finally:
        os.close(root)


@dataclass(frozen=True, slots=True)
class Entry:
    """One name in a folder of skills."""

    name: str
    kind: str  # "dir", "link" or "file"


def list_folder(base: Path, parts: Sequence[str]) -> list[Entry]:
    """The visible entries (no dot-names) of the folder `parts` beneath `base`, sorted."""
    fd = _open(base, parts, "/".join(parts) or str(base), os.O_DIRECTORY)
    try:
        with os.scandir(fd) as found:
            entries = [Entry(e.name, _kind(e)) for e in found if not e.name.startswith(".")]
    except OSError as exc:
        raise SkillFileError(_problem(exc, "/".join(parts) or str(base))) from None
    finally:
        os.close(fd)
    return sorted(entries, key=lambda e: e.name)


def _kind(entry: os.DirEntry[str]) -> str:
    if entry.is_symlink():
        return "link"
    return "dir" if entry.is_dir(follow_symlinks=False) else "file"


def read_file(
    base: Path, parts: Sequence[str], cap: int, *, shown: str, refuse_links: bool
) -> bytes:
    """The bytes of the regular file `parts` beneath `base`; TooLarge over `cap` bytes."""
    fd = _open(base, parts, shown)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsFolder(f"{shown} is a folder")
        if not stat.S_ISREG(st.st_mode):
            raise SkillFileError(f"{shown} is not a regular file (device, socket or pipe)")
        if refuse_links and st.st_nlink > 1:
            raise SkillFileError(
                f"{shown} has {st.st_nlink} hard links, so it may be a file from outside; refused"
            )
        if st.st_size > cap:
            raise TooLarge(shown, st.st_size, cap)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(cap + 1)
        except OSError as exc:
            raise SkillFileError(_problem(exc, shown)) from None
    if len(data) > cap:
        raise TooLarge(shown, len(data), cap)
    return data


def is_folder(base: Path, parts: Sequence[str], shown: str) -> bool:
    """True for a folder, False for anything else that exists; SkillFileError if nothing."""
    fd = _open(base, parts, shown)
    try:
        return stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def tree(base: Path, parts: Sequence[str], *, depth: int = 2, limit: int = MAX_LISTED) -> list[str]:
    """Paths below the folder `parts` (folders end in `/`), `depth` levels deep, at most
    `limit` of them (then a last line saying more were left out), SKILL.md itself left out."""
    found: list[str] = []
    pending: list[tuple[tuple[str, ...], int]] = [((), 1)]
    while pending and len(found) <= limit:
        below, level = pending.pop(0)
        try:
            entries = list_folder(base, [*parts, *below])
        except SkillFileError:
            continue
        for entry in entries:
            rel = "/".join([*below, entry.name])
            if entry.kind == "dir":
                found.append(rel + "/")
                if level < depth:
                    pending.append(((*below, entry.name), level + 1))
            elif entry.kind == "file" and (below or entry.name != "SKILL.md"):
                found.append(rel)
    shown = sorted(found[:limit])
    return [*shown, "[... more files not listed]"] if len(found) > limit else shown


def _open(base: Path, parts: Sequence[str], shown: str, flags: int = 0) -> int:
    try:
        return open_in_skill(base, parts, os.O_RDONLY | flags)
    except OSError as exc:
        raise SkillFileError(_problem(exc, shown)) from None


def _problem(exc: OSError, shown: str) -> str:
    code = exc.errno
    if code == errno.ENOENT:
        return f"{shown}: no such file or folder"
    if code == errno.ELOOP:
        return f"{shown}: a part of this path is a symbolic link; skills are read without links"
    if code == errno.ENOTDIR:
        return f"{shown}: a part of this path is a file, not a folder"
    if code == errno.EXDEV:
        return f"{shown}: the path leaves the skill's folder; refused"
    if code == errno.EACCES:
        return f"{shown}: permission denied"
    return f"{shown}: cannot be read ({exc.strerror})"
