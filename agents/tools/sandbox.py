"""Where `exec` runs a command: inside bubblewrap (`bwrap`), or, if the owner says so, bare.

`Sandbox.argv()` in bwrap mode: new PID and IPC namespaces (the daemon and the rest of the host
can't be signalled, no shared memory or semaphores with them), a new session, no network unless
`network=True` (`--unshare-net` leaves only a private loopback), every capability dropped, the
system directories (`/usr`, `/bin`, `/lib*`, `/etc`) read-only, a fresh `/tmp`, a minimal
`/dev`, its own `/proc` (or, where the host forbids mounting one, the host's read-only:
processes outside stay unsignallable and the non-dumpable daemon's environment unreadable),
the workspace (and `extra_rw`) read-write and nothing else (`/home`, `/root`, `/var`, `/run`,
`/srv`, `/opt` don't exist inside). Every `hide` path the sandbox would otherwise show (the
config folder, the state directory and its control socket, each secret file, the credentials
directory, wherever they live: under `/etc`, or inside a bound folder) is covered: a directory
with an empty tmpfs, a file with /dev/null. `ro_binds` (skill folders outside the workspace)
are bound read-only where the model was told to find them, and a hidden path inside one of
them is covered where it shows inside (`/skills/<name>/api.key`). `Sandbox.none()` runs the command
directly: only the environment scrub and limits apply.

Limits (`Limits`): CPU seconds, address space and file size are rlimits set in the child before
it execs. `/tmp` is a tmpfs of `tmp_mb` (bwrap's `--size`): its pages are no process's memory,
so no rlimit counts them and, without a cgroup, an unsized one could fill the host's memory;
a bwrap without `--size` is refused unless `tmp_mb` is 0. Processes and memory are counted for the whole command where the host lets Perch
manage cgroups (`cgroups.CgroupHome`: a delegated cgroup v2, or v1 as root): a cgroup per
command with `pids.max` and a memory limit. Without one, processes are limited by
RLIMIT_NPROC: inside the sandbox's own user namespace when bwrap makes one (Perch not root;
`prlimit` sets it after the namespace exists, so each command counts only its own processes),
else for the daemon's whole user, shared by every command.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from agents.tools.cgroups import CgroupHome

SandboxSetting = Literal["auto", "bwrap", "none"]
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
_MB = 1024 * 1024


class SandboxUnavailable(Exception):
    """The configured sandbox cannot run here; the message says what to install or set."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits for one command (0 means: leave that limit as inherited)."""

    cpu_s: int = 60
    memory_mb: int = 2048
    processes: int = 1024
    file_size_mb: int = 1024
    # The sandbox's /tmp: a tmpfs of this size (bwrap --size), memory no per-process limit
    # counts, so it is bounded by itself whoever runs Perch. 0: an unsized tmpfs.
    tmp_mb: int = 256

    def preexec(
        self,
        max_file_bytes: int | None = None,
        *,
        nproc: bool = True,
        join: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """A function for Popen's preexec_fn: moves the child into its cgroup (`join`) and
        sets these limits; with `max_file_bytes` (the disk's headroom) no file may grow past
        that either. `nproc=False` leaves RLIMIT_NPROC alone (a cgroup, or the sandbox's
        own user namespace, counts the processes instead)."""
        file_size = self.file_size_mb * _MB
        if max_file_bytes is not None:  # at least 1: 0 would mean "no limit" below
            file_size = max(min(file_size or max_file_bytes, max_file_bytes), 1)
        pairs = [
            (resource.RLIMIT_CPU, self.cpu_s),
            (resource.RLIMIT_AS, self.memory_mb * _MB),
            (resource.RLIMIT_NPROC, self.processes if nproc else 0),
            (resource.RLIMIT_FSIZE, file_size),
        ]
        wanted = [(which, value) for which, value in pairs if value > 0]

        def apply() -> None:
            if join is not None:
                join()
            for which, value in wanted:
                _soft, hard = resource.getrlimit(which)
                if hard != resource.RLIM_INFINITY:
                    value = min(value, hard)
                resource.setrlimit(which, (value, value))

        return apply


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How commands are wrapped: `mode` "bwrap" (with the bwrap binary) or "none"."""

    mode: Literal["bwrap", "none"]
    bwrap: str = ""
    network: bool = False
    limits: Limits = field(default_factory=Limits)
    hide: tuple[Path, ...] = ()
    mount_proc: bool = True
    # More folders bound read-write: (the host's folder, where it shows inside), e.g. an MCP
    # server's home, shown at a neutral path so the host's layout stays hidden.
    extra_rw: tuple[tuple[Path, Path], ...] = ()
    cgroups: CgroupHome | None = None  # where each command gets its cgroup, if anywhere
    nproc_inside: str = ""  # prlimit's path when RLIMIT_NPROC is set inside the namespace

    @classmethod
    def none(cls, limits: Limits | None = None) -> Sandbox:
        return cls(mode="none", limits=limits or Limits())

    def describe(self) -> str:
        """One line for doctor and logs: the mode and what it means."""
        if self.mode == "none":
            text = (
                "none: commands run unsandboxed as the daemon's user (environment scrubbed, "
                "resource limits only)"
            )
        else:
            net = "network on" if self.network else "no network"
            proc = "" if self.mount_proc else ", host /proc read-only (own /proc not mountable)"
            text = (
                f"bwrap ({self.bwrap}): own PID namespace, {net}, only the workspace writable{proc}"
            )
        return f"{text}; processes and memory: {self.counting()}"

    def counting(self) -> str:
        """Where the process and memory limits of a command are counted."""
        if self.cgroups is not None:
            return f"{self.cgroups.describe()}, for the whole command"
        if self.nproc_inside:
            return (
                "processes per command (its own user namespace), memory per process; no "
                "cgroup to manage here"
            )
        return (
            "per process only (RLIMIT_NPROC counts every process of the daemon's user, "
            "and does not bind root); no cgroup to manage here"
        )

    def nproc_by_rlimit(self, in_cgroup: bool) -> bool:
        """Whether RLIMIT_NPROC must be set before exec (no cgroup, no namespace of its own)."""
        return not in_cgroup and not self.nproc_inside

    def argv(
        self, workspace: Path, command: str, ro_binds: Sequence[tuple[Path, str]] = ()
    ) -> list[str]:
        """The argument list that runs `/bin/sh -c command` in `workspace` under this sandbox,
        with each (folder, inside) of `ro_binds` visible read-only at `inside` (bwrap only)."""
        shell = ["/bin/sh", "-c", command]
        if self.mode == "none":
            return shell
        ws = str(workspace)
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
        if self.nproc_inside:  # its own user namespace, where its processes are counted apart
            args.append("--unshare-user")
        if not self.network:
            args.append("--unshare-net")
        args += ["--cap-drop", "ALL"]
        shown: list[Path] = []
        for system in SYSTEM_DIRS:
            if os.path.islink(system):
                args += ["--symlink", os.readlink(system), system]
            elif os.path.isdir(system):
                args += ["--ro-bind", system, system]
                shown.append(Path(system))
        if self.network:  # a resolv.conf that links out (systemd-resolved's, under /run)
            target = Path(os.path.realpath("/etc/resolv.conf"))
            if target.is_file() and not _inside(target, shown):
                args += ["--ro-bind", str(target), str(target)]
        if self.limits.tmp_mb > 0:  # a sized /tmp: tmpfs pages are no process's memory
            args += ["--size", str(self.limits.tmp_mb * _MB)]
        args += ["--tmpfs", "/tmp", "--dev", "/dev"]
        args += ["--proc", "/proc"] if self.mount_proc else ["--ro-bind", "/proc", "/proc"]
        real = Path(os.path.realpath(workspace))
        binds = [(real, real), *((Path(os.path.realpath(h)), i) for h, i in self.extra_rw)]
        read_only = [(Path(os.path.realpath(h)), Path(i)) for h, i in ro_binds]
        inside = [where for _, where in [*binds, *read_only]]
        early, late = _masks(self.hide, [*shown, *inside], inside)
        args += early
        for host, where in binds:
            args += ["--bind", str(host), str(where)]
        for host, where in read_only:
            args += ["--ro-bind", str(host), str(where)]
        args += late
        args += _masks_in_binds(self.hide, read_only)
        args += ["--chdir", ws, "--"]
        if self.nproc_inside and self.limits.processes > 0:
            n = self.limits.processes
            args += [self.nproc_inside, f"--nproc={n}:{n}", "--"]
        return args + shell


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _masks(
    hide: Iterable[Path], shown: list[Path], binds: list[Path]
) -> tuple[list[str], list[str]]:
    """bwrap arguments that cover each hidden path the sandbox would show: a directory with an
    empty tmpfs, anything else with /dev/null. A directory holding a bound folder is covered
    before that bind (so the folder stays), everything else after the binds (so a bound
    folder cannot uncover it)."""
    early: list[str] = []
    late: list[str] = []
    for path in dict.fromkeys(Path(os.path.realpath(p)) for p in hide):
        if not os.path.lexists(path) or not _inside(path, shown):
            continue
        if path.is_dir():
            holds_bind = any(b == path or b.is_relative_to(path) for b in binds)
            (early if holds_bind else late).extend(["--tmpfs", str(path)])
        else:
            late.extend(["--ro-bind", "/dev/null", str(path)])
    return early, late


def _masks_in_binds(hide: Iterable[Path], binds: list[tuple[Path, Path]]) -> list[str]:
    """bwrap arguments that cover each hidden path inside a folder bound elsewhere (a secret
    file beside a skill's SKILL.md, seen at `/skills/<name>/`): where it shows inside."""
    found: list[str] = []
    for path in dict.fromkeys(Path(os.path.realpath(p)) for p in hide):
        for host, where in binds:
            if path == host or not path.is_relative_to(host) or not os.path.lexists(path):
                continue
            inside = str(where / path.relative_to(host))
            if path.is_dir():
                found += ["--tmpfs", inside]
            else:
                found += ["--ro-bind", "/dev/null", inside]
    return found


def _prlimit() -> str:
    """prlimit (util-linux) where the sandbox shows it, or "" (then RLIMIT_NPROC is set
    before bwrap, and counts the daemon's whole user)."""
    found = shutil.which("prlimit", path="/usr/bin:/bin")
    return found if found and _inside(Path(os.path.realpath(found)), map(Path, SYSTEM_DIRS)) else ""


def _sizes_tmpfs(bwrap: str) -> bool:
    """Whether this bwrap has `--size` (for `--tmpfs`)."""
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, timeout=10, check=False, env={}
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--size" in done.stdout + done.stderr


def _probe(sandbox: Sandbox) -> str | None:
    """Run `true` in the sandbox once; None if it works, else bwrap's complaint."""
    scratch = Path("/tmp") if Path("/tmp").is_dir() else Path("/")
    try:
        done = subprocess.run(
            sandbox.argv(scratch, "true"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=20,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    return done.stderr.decode("utf-8", errors="replace").strip() or f"exit {done.returncode}"


def select_sandbox(
    setting: SandboxSetting,
    *,
    network: bool = False,
    limits: Limits | None = None,
    hide: Iterable[Path] = (),
    bwrap_path: str | None = None,
    cgroups: bool = True,
) -> Sandbox:
    """The sandbox for `exec.sandbox: setting`, or SandboxUnavailable saying what to do.

    "none" is always honoured. "auto" and "bwrap" need a working bwrap: it is probed once
    (a `true` run), first with its own `/proc` and, where the host forbids mounting one (some
    hardened services and containers), with the host `/proc` bound read-only instead.
    `cgroups`: look for a cgroup tree to give each command its own (exec does, MCP servers
    don't).
    """
    lim = limits or Limits()
    home = CgroupHome.find() if cgroups else None
    if setting == "none":
        return Sandbox("none", limits=lim, cgroups=home)
    found = bwrap_path or shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(
            f"exec.sandbox is {setting} but bubblewrap (bwrap) is not installed, so exec would "
            "run commands unsandboxed; install it (apt-get install bubblewrap), or set "
            "agent.exec.sandbox: none to accept unsandboxed commands, or disable exec"
        )
    if lim.tmp_mb > 0 and not _sizes_tmpfs(found):
        raise SandboxUnavailable(
            f"bwrap ({found}) cannot size a tmpfs (no --size; bubblewrap 0.5 or later can), so "
            "exec's /tmp would have no bound; upgrade bubblewrap, or set agent.exec.tmp_mb: 0 "
            "to accept an unsized /tmp"
        )
    inside = _prlimit() if home is None and os.geteuid() != 0 and lim.processes > 0 else ""
    sandbox = Sandbox("bwrap", found, network, lim, tuple(hide))
    sandbox = replace(sandbox, cgroups=home, nproc_inside=inside)
    problem = _probe(sandbox)
    if problem is None:
        return sandbox
    fallback = replace(sandbox, mount_proc=False)
    if _probe(fallback) is None:
        return fallback
    raise SandboxUnavailable(
        f"exec.sandbox is {setting} but bwrap ({found}) does not work here: {problem}; allow "
        "unprivileged user namespaces (under the shipped systemd unit: install "
        "systemd/exec-sandbox.conf as a drop-in, `systemd/install.sh --exec`), or set "
        "agent.exec.sandbox: none to accept unsandboxed commands, or disable exec"
    )
