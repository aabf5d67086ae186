"""`exec {command, timeout_s?}`: run a shell command in the session workspace.

Where it runs is the `Sandbox` it is given (agents/tools/sandbox.py): under bubblewrap it gets
its own PID namespace, no network unless allowed, and only the workspace writable; with
`Sandbox.none()` it runs as the daemon's own user with that user's file and network access.
Either way: `/bin/sh -c` in its own process group (session), stdin from /dev/null, stdout and
stderr combined and capped (head and tail kept, the cut marked), a timeout, resource limits, and
a scrubbed environment (PATH, HOME=workspace, LANG, TZ and allow-listed names, never a name or a
value that looks like a secret). Under bubblewrap, the folders `mounts()` names (skills outside
the workspace) are visible read-only where the prompt says they are, asked for at each call. When the call ends (exit, timeout, `ctx.cancel`, or task
cancellation) the whole process group is killed, so `cmd &` does not outlive the call; under
bwrap the PID namespace dies with it, and where the command has its own cgroup (sandbox.py)
everything in it is killed, so not even a process that calls setsid() escapes.

The disk: no file may grow past the room left above the kept-free floor (RLIMIT_FSIZE), and
while the command runs the floor is watched for the whole command (checked every 50 ms, and
more often as the room shrinks, down to 1 ms): when it is reached the command is stopped and
the model told. Where the command has a cgroup, the result also says when it ran into its
memory or process limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from agents.cancel import Cancelled, CancelToken
from agents.tools.base import ToolContext, ToolError, ToolResult
from agents.tools.cgroups import CommandCgroup
from agents.tools.disk_room import free_and_floor, headroom
from agents.tools.exec_env import build_env
from agents.tools.sandbox import Sandbox

log = logging.getLogger(__name__)

EOF_GRACE_S = 1.0
KILL_WAIT_S = 2.0
NEARLY_FULL = 1024 * 1024 * 1024  # headroom under which a result says the disk is nearly full
DISK_POLL_MAX_S = 0.05
DISK_POLL_MIN_S = 0.001
DISK_WRITE_RATE = 2e9  # bytes a second a fast disk takes: the room is checked before it is gone
DISK_SLACK = 1024 * 1024  # the daemon's own writes (logs, history) while a command runs
_MB = 1024 * 1024


class _CappedOutput:
    """Keeps the first and last `keep` bytes of a stream of any length."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def render(self, max_chars: int) -> str:
        head_n = max_chars // 2
        tail_n = max_chars - head_n
        if self.total == len(self.head) + len(self.tail):
            text = (self.head + self.tail).decode("utf-8", errors="replace")
            if len(text) <= max_chars:
                return text
            head, tail = text[:head_n], text[len(text) - tail_n :]
        else:
            head = self.head.decode("utf-8", errors="replace")[:head_n]
            tail_text = self.tail.decode("utf-8", errors="replace")
            tail = tail_text[len(tail_text) - tail_n :]
        return (
            f"{head}\n[... output truncated: {self.total:,} bytes in total; showing the first "
            f"{len(head):,} and the last {len(tail):,} characters ...]\n{tail}"
        )


class _ShellProtocol(asyncio.SubprocessProtocol):
    def __init__(self, output: _CappedOutput) -> None:
        self.output = output
        self.exited = asyncio.Event()
        self.eof = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.feed(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.eof.set()

    def process_exited(self) -> None:
        self.exited.set()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class ExecTool:
    """`exec`: run `/bin/sh -c command` in the workspace with a timeout and an output cap."""

    name = "exec"

    def __init__(
        self,
        timeout_s: float = 60,
        max_timeout_s: float = 600,
        max_output_chars: int = 20_000,
        allow_env: Iterable[str] = (),
        sandbox: Sandbox | None = None,
        keep_free: int | None = None,
        mounts: Callable[[], Sequence[tuple[Path, str]]] | None = None,
    ) -> None:
        self.sandbox = sandbox or Sandbox.none()
        self.mounts = mounts  # read-only (folder, where inside) pairs, looked up per call
        self.keep_free = keep_free  # bytes left free on the disk (None: disk_room's rule)
        self.timeout_s = timeout_s
        self.max_timeout_s = max_timeout_s
        self.max_output_chars = max_output_chars
        self.allow_env = tuple(allow_env)
        self.description = (
            "Run a shell command (/bin/sh -c) in the workspace and return its exit code and "
            f"combined stdout+stderr. {_sandbox_note(self.sandbox)} Default timeout "
            f"{timeout_s:g} s (at most {max_timeout_s:g} s); output over "
            f"{max_output_chars:,} characters is cut in the middle. No stdin; background "
            "processes are killed when the command ends. Secrets are not in its environment."
        )
        if mounts is not None and self.sandbox.mode == "bwrap":
            self.description += (
                " Skill folders from outside the workspace are visible read-only at the "
                "location the skills list gives (/skills/<name>)."
            )
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Shell command line to run."},
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": max_timeout_s,
                    "description": f"Seconds before the command is killed (default {timeout_s:g}).",
                },
            },
            "required": ["command"],
        }

    def _timeout_arg(self, args: dict[str, Any]) -> float:
        value = args.get("timeout_s")
        if value is None:
            return self.timeout_s
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ToolError(f"argument 'timeout_s' must be a number, got {type(value).__name__}")
        if not 0 < value <= self.max_timeout_s:
            raise ToolError(
                f"argument 'timeout_s' must be > 0 and <= {self.max_timeout_s:g} (the configured "
                f"maximum), got {value:g}"
            )
        return float(value)

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        command = args.get("command")
        if command is None:
            raise ToolError("missing required argument 'command' (a string)")
        if not isinstance(command, str):
            raise ToolError(f"argument 'command' must be a string, got {type(command).__name__}")
        if not command.strip():
            raise ToolError("argument 'command' is empty")
        if "\x00" in command:
            raise ToolError("argument 'command' contains a NUL byte")
        timeout = self._timeout_arg(args)
        if not ctx.workspace.is_dir():
            raise ToolError(f"workspace {ctx.workspace} does not exist; cannot run commands")
        ctx.cancel.check()

        output = _CappedOutput(keep=self.max_output_chars * 4)
        room = headroom(ctx.workspace, self.keep_free)  # no file may grow past it either
        # bwrap binds the real path; HOME and the working directory name that same path.
        workspace = ctx.workspace.resolve() if self.sandbox.mode == "bwrap" else ctx.workspace
        binds = self.mounts() if self.mounts is not None and self.sandbox.mode == "bwrap" else ()
        sandbox = self.sandbox
        if ctx.private:  # the owner's memory files, in a turn for someone else: not there
            if sandbox.mode != "bwrap":
                raise ToolError(
                    "exec runs unsandboxed here, so it cannot keep the owner's memory files "
                    "out of this conversation; refused"
                )
            hidden = (*sandbox.hide, *(workspace / name for name in ctx.private))
            sandbox = replace(sandbox, hide=hidden)
        group = self._cgroup()
        preexec = self.sandbox.limits.preexec(
            room,
            nproc=self.sandbox.nproc_by_rlimit(group is not None),
            join=group.join if group is not None else None,
        )
        loop = asyncio.get_running_loop()
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _ShellProtocol(output),
                *sandbox.argv(workspace, command, binds),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=workspace,
                env=build_env(workspace, self.allow_env),
                start_new_session=True,
                preexec_fn=preexec,
            )
        )
        try:
            try:
                transport, proto = await asyncio.shield(spawn)
            except asyncio.CancelledError:
                # Cancelled while starting: the shell may already run (and have children), so
                # finish the start, then kill the group before giving up.
                with contextlib.suppress(Exception):
                    started, _ = await spawn
                    _kill_group(started.get_pid())
                    started.close()
                raise
            pgid = transport.get_pid()
            floor = _disk_floor(ctx.workspace, self.keep_free)
            try:
                outcome = await _supervise(proto, ctx.cancel, timeout, floor)
            finally:
                _kill_group(pgid)
                if group is not None:
                    group.kill()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(KILL_WAIT_S):
                        await proto.exited.wait()
                        await proto.eof.wait()
                transport.close()
        finally:
            hit = self._limit_note(group)
            if group is not None:
                await asyncio.to_thread(group.close)

        if outcome == "cancelled":
            raise Cancelled(ctx.cancel.reason or "cancelled")
        text = output.render(self.max_output_chars) or "(no output)"
        if outcome == "timeout":
            status = f"[timed out after {timeout:g} s; the command's process group was killed]"
            return ToolResult(f"{status}\n{text}", is_error=True)
        if outcome == "disk":
            status = (
                "[stopped: the disk holding the workspace reached the space kept free for "
                "Perch's history and logs, so the command was killed. Delete files no longer "
                "needed, or tell the user the disk is nearly full]"
            )
            return ToolResult(f"{status}\n{text}", is_error=True)
        code = transport.get_returncode()
        if code is None or code < 0:
            status = f"[killed by signal {-(code or 0)}]" if code else "[exit status unknown]"
        else:
            status = f"[exit code {code}]"
        if outcome == "lingering":
            text += "\n[background processes still holding the output were killed]"
        text += hit
        if room is not None and room < NEARLY_FULL:
            text += (
                f"\n[the disk is nearly full: no file could grow past {room:,} bytes in this "
                "command (signal 25 kills a write past it); the rest is kept free for Perch's "
                "history. Deleting files works; tell the user if space is needed]"
            )
        return ToolResult(f"{status}\n{text}")

    def _cgroup(self) -> CommandCgroup | None:
        """This command's own cgroup, where the host lets Perch make one."""
        home = self.sandbox.cgroups
        if home is None:
            return None
        limits = self.sandbox.limits
        try:
            return home.command(limits.processes, limits.memory_mb * _MB)
        except OSError as exc:
            log.warning("exec: no cgroup for this command (%s); rlimits only", exc)
            return None

    def _limit_note(self, group: CommandCgroup | None) -> str:
        """What the model should know when the command ran into its cgroup's limits."""
        hit = group.limit_hit() if group is not None else None
        if group is None or hit is None:
            return ""
        if hit == "memory":
            return (
                f"\n[the command reached its memory limit ({group.memory_bytes // _MB:,} MB for "
                "all its processes together); the kernel killed a process of it]"
            )
        return (
            f"\n[the command reached its limit of {group.processes:,} processes; starting "
            "more failed]"
        )


def _sandbox_note(sandbox: Sandbox) -> str:
    if sandbox.mode == "none":
        return "Not a sandbox: it runs with the assistant's own user rights."
    net = "with network access" if sandbox.network else "without network access"
    return (
        f"It runs in a sandbox {net}: only the workspace (and /tmp, emptied after each call) "
        "is writable; CPU time, memory, processes and file size are limited."
    )


async def _disk_floor(workspace: Path, keep: int | None) -> None:
    """Return once the command has taken the workspace's disk below its kept-free floor: free
    space more than `DISK_SLACK` under both the floor and what was free when it started (so a
    command started below the floor may still delete files, and the daemon's own small writes
    meanwhile don't count). Checked before a fast disk could fill what is left: every 50 ms at
    most, every 1 ms near the floor."""
    known = free_and_floor(workspace, keep)
    if known is None:  # the filesystem cannot be asked: the per-file limit still holds
        await asyncio.Future()
        return
    free, floor = known
    limit = min(free, floor) - DISK_SLACK
    while True:
        known = free_and_floor(workspace, keep)
        free = known[0] if known is not None else free
        if free < limit:
            return
        wait = min(DISK_POLL_MAX_S, max(DISK_POLL_MIN_S, (free - limit) / DISK_WRITE_RATE))
        await asyncio.sleep(wait)


async def _supervise(
    proto: _ShellProtocol, cancel: CancelToken, timeout: float, floor: Coroutine[Any, Any, None]
) -> str:
    """ "exited", "lingering" (exited, output still held open), "timeout", "cancelled" or
    "disk" (the disk's floor was reached)."""
    exit_wait = asyncio.ensure_future(proto.exited.wait())
    cancel_wait = asyncio.ensure_future(cancel.wait())
    floor_wait = asyncio.ensure_future(floor)
    try:
        done, _ = await asyncio.wait(
            {exit_wait, cancel_wait, floor_wait},
            timeout=timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        exit_wait.cancel()
        cancel_wait.cancel()
        floor_wait.cancel()
    if exit_wait in done:
        try:
            await asyncio.wait_for(proto.eof.wait(), EOF_GRACE_S)
        except TimeoutError:
            return "lingering"
        return "exited"
    if cancel_wait in done:
        return "cancelled"
    return "disk" if floor_wait in done else "timeout"
