"""Where `exec` runs a command: inside bubblewrap (`bwrap`), or, if the owner says so, bare.

`Sandbox.argv()` in bwrap mode: a new PID namespace (the daemon and the rest of the host can't
be signalled), a new session, no network unless `network=True` (`--unshare-net` leaves only a
private loopback), every capability dropped, the system directories (`/usr`, `/bin`, `/lib*`,
`/etc`) read-only, a fresh `/tmp`, a minimal `/dev`, its own `/proc` (or, where the host
forbids mounting one, the host's read-only: processes outside stay unsignallable and the
non-dumpable daemon's environment unreadable), the workspace read-write and nothing else
(`/home`, `/root`, `/var`, `/run`, `/srv`, `/opt` don't exist inside). `hide` paths under the
read-only ones (the config directory) are covered with an empty tmpfs. `ro_binds` (skill
folders outside the workspace) are bound read-only where the model was told to find them. `Sandbox.none()` runs
the command directly: only the environment scrub and limits apply. In both modes `Limits`
(CPU seconds, address space, processes, file size) are set with setrlimit in the child before
it execs, and inherited by everything the command starts.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SandboxSetting = Literal["auto", "bwrap", "none"]
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
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

    def preexec(self, max_file_bytes: int | None = None) -> Callable[[], None]:
        """A function for Popen's preexec_fn that sets these limits in the child; with
        `max_file_bytes` (the disk's headroom), no file may grow past that either."""
        file_size = self.file_size_mb * _MB
        if max_file_bytes is not None:  # at least 1: 0 would mean "no limit" below
            file_size = max(min(file_size or max_file_bytes, max_file_bytes), 1)
        pairs = [
            (resource.RLIMIT_CPU, self.cpu_s),
            (resource.RLIMIT_AS, self.memory_mb * _MB),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_FSIZE, file_size),
        ]
        wanted = [(which, value) for which, value in pairs if value > 0]

        def apply() -> None:
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

    @classmethod
    def none(cls, limits: Limits | None = None) -> Sandbox:
        return cls(mode="none", limits=limits or Limits())

    def describe(self) -> str:
        """One line for doctor and logs: the mode and what it means."""
        if self.mode == "none":
            return (
                "none: commands run unsandboxed as the daemon's user (environment scrubbed, "
                "resource limits only)"
            )
        net = "network on" if self.network else "no network"
        proc = "" if self.mount_proc else ", host /proc read-only (own /proc not mountable)"
        return f"bwrap ({self.bwrap}): own PID namespace, {net}, only the workspace writable{proc}"

    def argv(
        self, workspace: Path, command: str, ro_binds: Sequence[tuple[Path, str]] = ()
    ) -> list[str]:
        """The argument list that runs `/bin/sh -c command` in `workspace` under this sandbox,
        with each (folder, inside) of `ro_binds` visible read-only at `inside` (bwrap only)."""
        shell = ["/bin/sh", "-c", command]
        if self.mode == "none":
            return shell
        ws = str(workspace)
        args = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid"]
        if not self.network:
            args.append("--unshare-net")
        args += ["--cap-drop", "ALL"]
        for path in _SYSTEM_DIRS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for hidden in self.hide:
            if _under_system_dir(hidden) and hidden.is_dir():
                args += ["--tmpfs", str(hidden)]
        args += ["--tmpfs", "/tmp", "--dev", "/dev"]
        args += ["--proc", "/proc"] if self.mount_proc else ["--ro-bind", "/proc", "/proc"]
        args += ["--bind", ws, ws]
        for folder, inside in ro_binds:
            args += ["--ro-bind", str(folder), inside]
        args += ["--chdir", ws, "--"]
        return args + shell


def _under_system_dir(path: Path) -> bool:
    return any(path.is_relative_to(root) for root in _SYSTEM_DIRS)


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
) -> Sandbox:
    """The sandbox for `exec.sandbox: setting`, or SandboxUnavailable saying what to do.

    "none" is always honoured. "auto" and "bwrap" need a working bwrap: it is probed once
    (a `true` run), first with its own `/proc` and, where the host forbids mounting one (some
    hardened services and containers), with the host `/proc` bound read-only instead.
    """
    lim = limits or Limits()
    if setting == "none":
        return Sandbox.none(lim)
    found = bwrap_path or shutil.which("bwrap")
    if not found:
        raise SandboxUnavailable(
            f"exec.sandbox is {setting} but bubblewrap (bwrap) is not installed, so exec would "
            "run commands unsandboxed; install it (apt-get install bubblewrap), or set "
            "agent.exec.sandbox: none to accept unsandboxed commands, or disable exec"
        )
    sandbox = Sandbox("bwrap", found, network, lim, tuple(hide))
    problem = _probe(sandbox)
    if problem is None:
        return sandbox
    fallback = Sandbox("bwrap", found, network, lim, tuple(hide), mount_proc=False)
    if _probe(fallback) is None:
        return fallback
    raise SandboxUnavailable(
        f"exec.sandbox is {setting} but bwrap ({found}) does not work here: {problem}; allow "
        "unprivileged user namespaces (under the shipped systemd unit: install "
        "systemd/exec-sandbox.conf as a drop-in, `systemd/install.sh --exec`), or set "
        "agent.exec.sandbox: none to accept unsandboxed commands, or disable exec"
    )
