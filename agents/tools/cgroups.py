"""Per-command cgroups for `exec`: one budget of processes and memory for a whole command.

`CgroupHome.find()` looks for a cgroup tree this process may manage, and returns None if there
is none (exec then falls back to rlimits, see sandbox.py):
- cgroup v2: our own cgroup (from /proc/self/cgroup) when it is delegated to us, as systemd's
  `Delegate=` does for a service (writable by us, marked with the `trusted.delegate` or
  `user.delegate` xattr when we are root), offering the `pids` and `memory` controllers. A v2
  cgroup whose children have controllers may hold no process itself, so before the first
  command the daemon moves the processes of its cgroup into a leaf `perch-daemon/` and
  enables `+pids +memory` for the children (`prepare`).
- cgroup v1 (legacy or hybrid hierarchies): the `pids` and `memory` hierarchies, where our
  cgroups there are writable (as root, say).

`home.command(processes, memory_bytes)` makes one child per command (`perch-exec-<pid>-<n>`)
with `pids.max` and the memory limit (no swap where the kernel has the knob; on v2 the group
is OOM-killed as a whole), each at most half of what the enclosing cgroup has left (under the
unit: `TasksMax=`, `MemoryMax=`), so no command can take the rest from the daemon. `join()` runs in the child between fork and exec; `kill()` kills
every process in the group (`cgroup.kill` on v2, SIGKILL per pid until empty on v1), even ones
that left the process group; `limit_hit()` says whether memory or processes ran out; `close()`
removes the cgroup once empty.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "perch-exec-"
LEAF = "perch-daemon"
CLOSE_WAIT_S = 5.0
_counter = itertools.count(1)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _counter_of(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().isdigit():
            return int(value)
    return 0


def _within_half(wanted: int, limit_file: Path, used_file: Path) -> int:
    """`wanted`, but at most half of what the enclosing cgroup (the systemd unit's TasksMax or
    MemoryMax) has left: one command can never take the rest from the daemon and the others."""
    limit, used = _read(limit_file).strip(), _read(used_file).strip()
    if not (limit.isdigit() and used.isdigit()):
        return wanted
    half = max((int(limit) - int(used)) // 2, 1)
    return min(wanted, half) if wanted > 0 else half


@dataclass(frozen=True, slots=True)
class _Mount:
    root: str
    point: Path
    fstype: str
    options: frozenset[str]


def _mounts() -> list[_Mount]:
    found = []
    for line in _read(Path("/proc/self/mountinfo")).splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 5 or len(rest) < 3 or not rest[0].startswith("cgroup"):
            continue
        found.append(_Mount(fields[3], Path(fields[4]), rest[0], frozenset(rest[2].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for v2) -> our cgroup path in that hierarchy."""
    own: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _place(mount: _Mount, path: str) -> Path | None:
    rel = os.path.relpath(path, mount.root) if mount.root != "/" else path.lstrip("/")
    if rel.startswith(".."):
        return None
    return mount.point / rel if rel != "." else mount.point


def _writable(directory: Path) -> bool:
    return os.access(directory, os.W_OK) and os.access(directory / "cgroup.procs", os.W_OK)


def _delegated(directory: Path, own_path: str) -> bool:
    if os.geteuid() != 0 or own_path == "/":
        return True  # a non-root process can only write a cgroup that was handed to it
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(directory, name) == b"1":
                return True
    return False


@dataclass(slots=True)
class CommandCgroup:
    """The cgroup (v2) or cgroups (v1: pids, memory) of one command."""

    version: int
    dirs: tuple[Path, ...]
    processes: int = 0  # the limits it was given (0: none)
    memory_bytes: int = 0
    _procs: tuple[bytes, ...] = field(default=())

    def __post_init__(self) -> None:
        self._procs = tuple(os.fsencode(d / "cgroup.procs") for d in self.dirs)

    def join(self) -> None:
        """Move the calling process in (for Popen's preexec_fn: no allocation worth naming)."""
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def move(self, pid: int) -> None:
        """Move the running process `pid` (all its threads) in; its later children are born
        inside. OSError if the kernel refuses (a process gone, a limit already met)."""
        for procs in self._procs:
            _write(Path(os.fsdecode(procs)), str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            found |= {int(p) for p in _read(directory / "cgroup.procs").split() if p.isdigit()}
        return found

    def kill(self) -> None:
        """SIGKILL every process in the group (also those that left the process group)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
                return
        for _ in range(100):  # v1: a fork racing the kill shows up in the next read
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def limit_hit(self) -> str | None:
        """ "memory" or "processes" when the command ran into that limit, else None."""
        memory, processes = self.limit_counts()
        return "memory" if memory else "processes" if processes else None

    def limit_counts(self) -> tuple[int, int]:
        """How often so far memory ran out (OOM kills) and a fork was refused."""
        if self.version == 2:
            memory, pids = self.dirs[0] / "memory.events", self.dirs[0] / "pids.events"
        else:
            memory, pids = self.dirs[1] / "memory.oom_control", self.dirs[0] / "pids.events"
        events = _read(memory)
        return (
            _counter_of(events, "oom_kill") or _counter_of(events, "oom"),
            _counter_of(_read(pids), "max"),
        )

    def close(self) -> None:
        """Remove the cgroup once its processes are gone (killed first; bounded wait)."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        while self.pids() and time.monotonic() < deadline:
            self.kill()
            time.sleep(0.01)
        for directory in self.dirs:
            try:
                directory.rmdir()
            except OSError as exc:
                log.warning("exec: cgroup %s could not be removed (%s)", directory, exc)


@dataclass(slots=True)
class CgroupHome:
    """Where per-command cgroups are made: our v2 cgroup, or our v1 pids and memory ones."""

    version: int
    roots: tuple[Path, ...]
    _prepared: bool = False

    @classmethod
    def find(cls) -> CgroupHome | None:
        """The cgroup tree this process may manage, or None (nothing is changed here)."""
        own, mounts = _own_cgroups(), _mounts()
        v2 = next((m for m in mounts if m.fstype == "cgroup2"), None)
        if v2 is not None and "" in own:
            home = _place(v2, own[""])
            controllers = set(_read(home / "cgroup.controllers").split()) if home else set()
            usable = home and {"pids", "memory"} <= controllers and _writable(home)
            if home and usable and _delegated(home, own[""]):
                return cls(2, (home,))
        roots = []
        for controller in ("pids", "memory"):
            mount = next(
                (m for m in mounts if m.fstype == "cgroup" and controller in m.options), None
            )
            place = _place(mount, own.get(controller, "")) if mount and controller in own else None
            if place is None or not _writable(place):
                return None
            roots.append(place)
        return cls(1, tuple(roots))

    def take_back(self, pid: int) -> None:
        """Move process `pid` back into the daemon's own cgroup (v2: where this process is
        now, the leaf once `prepare` made one; v1: our pids and memory cgroups)."""
        if self.version == 1:
            dirs: tuple[Path | None, ...] = self.roots
        else:
            v2 = next((m for m in _mounts() if m.fstype == "cgroup2"), None)
            own = _own_cgroups().get("")
            dirs = (_place(v2, own) if v2 is not None and own is not None else None,)
        for directory in dirs:
            if directory is not None:
                _write(directory / "cgroup.procs", str(pid))

    def describe(self) -> str:
        return f"a cgroup v{self.version} per command ({', '.join(map(str, self.roots))})"

    def prepare(self) -> None:
        """v2: move this cgroup's processes into a leaf and give the children pids and memory
        controllers; both versions: remove empty command cgroups a crashed daemon left."""
        if self._prepared:
            return
        for root in self.roots:
            for stale in root.glob(f"{PREFIX}*"):
                owner = stale.name.removeprefix(PREFIX).split("-", 1)[0]
                if owner.isdigit() and not Path(f"/proc/{owner}").exists():
                    with contextlib.suppress(OSError):
                        stale.rmdir()
        if self.version == 2:
            home = self.roots[0]
            enabled = set(_read(home / "cgroup.subtree_control").split())
            if not {"pids", "memory"} <= enabled:
                leaf = home / LEAF
                leaf.mkdir(exist_ok=True)
                for pid in _read(home / "cgroup.procs").split():
                    with contextlib.suppress(ProcessLookupError, OSError):
                        _write(leaf / "cgroup.procs", pid)
                _write(home / "cgroup.subtree_control", "+pids +memory")
        self._prepared = True

    def command(self, processes: int, memory_bytes: int) -> CommandCgroup:
        """A new cgroup for one command with these limits (0: unlimited); OSError if the
        kernel refuses (the caller then runs the command on rlimits alone)."""
        self.prepare()
        name = f"{PREFIX}{os.getpid()}-{next(_counter)}"
        dirs = tuple(root / name for root in self.roots)
        for directory in dirs:
            directory.mkdir()
        group = CommandCgroup(self.version, dirs)
        try:
            group.processes, group.memory_bytes = self._limit(dirs, processes, memory_bytes)
        except OSError:
            group.close()
            raise
        return group

    def _limit(self, dirs: tuple[Path, ...], processes: int, memory_bytes: int) -> tuple[int, int]:
        pids_dir, memory_dir = (dirs[0], dirs[0]) if self.version == 2 else dirs
        pids_root, memory_root = (self.roots[0], self.roots[-1])
        processes = _within_half(processes, pids_root / "pids.max", pids_root / "pids.current")
        if self.version == 2:
            memory_bytes = _within_half(
                memory_bytes, memory_root / "memory.max", memory_root / "memory.current"
            )
        if processes > 0:
            _write(pids_dir / "pids.max", str(processes))
        if memory_bytes <= 0:
            return processes, 0
        if self.version == 2:
            _write(memory_dir / "memory.max", str(memory_bytes))
            for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if (memory_dir / knob).exists():
                    _write(memory_dir / knob, value)
        else:
            _write(memory_dir / "memory.limit_in_bytes", str(memory_bytes))
            if (memory_dir / "memory.memsw.limit_in_bytes").exists():
                _write(memory_dir / "memory.memsw.limit_in_bytes", str(memory_bytes))
        return processes, memory_bytes
