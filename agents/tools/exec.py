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
bwrap the PID namespace dies with it, so not even a process that calls setsid() escapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.cancel import Cancelled, CancelToken
from agents.tools.base import ToolContext, ToolError, ToolResult
from agents.tools.disk_room import headroom
from agents.tools.sandbox import Sandbox

SECRET_MARKERS = (
    "TOKEN",
    "KEY",
    "SECRET",
    "PASSWORD",
    "PASS",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
)
# Values that carry a credential whatever their variable is called: a URL with a password
# (`postgres://user:pass@host`), well-known token prefixes, PEM private keys.
_SECRET_VALUE = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"
    r"|^(sk-|sk_live_|xox[abpors]-|xapp-|ghp_|gho_|github_pat_|glpat-|AKIA[0-9A-Z]{12})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
EOF_GRACE_S = 1.0
KILL_WAIT_S = 2.0
NEARLY_FULL = 1024 * 1024 * 1024  # headroom under which a result says the disk is nearly full


def is_secret_name(name: str) -> bool:
    """True if an environment variable name looks like it holds a secret."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def looks_like_secret_value(value: str) -> bool:
    """True if a value looks like a credential (URL with a password, token, private key)."""
    return _SECRET_VALUE.search(value) is not None


def build_env(
    workspace: Path, allow_env: Iterable[str] = (), source: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a command sees: PATH, HOME, LANG, TZ and allowed non-secret names."""
    src = os.environ if source is None else source
    env = {
        name: src[name]
        for name in allow_env
        if name in src and not is_secret_name(name) and not looks_like_secret_value(src[name])
    }
    env["PATH"] = src.get("PATH") or DEFAULT_PATH
    env["LANG"] = src.get("LANG") or "C.UTF-8"
    if src.get("TZ"):
        env["TZ"] = src["TZ"]
    env["HOME"] = str(workspace)
    return env


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
        loop = asyncio.get_running_loop()
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _ShellProtocol(output),
                *self.sandbox.argv(workspace, command, binds),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=workspace,
                env=build_env(workspace, self.allow_env),
                start_new_session=True,
                preexec_fn=self.sandbox.limits.preexec(room),
            )
        )
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
        try:
            outcome = await _supervise(proto, ctx.cancel, timeout)
        finally:
            _kill_group(pgid)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KILL_WAIT_S):
                    await proto.exited.wait()
                    await proto.eof.wait()
            transport.close()

        if outcome == "cancelled":
            raise Cancelled(ctx.cancel.reason or "cancelled")
        text = output.render(self.max_output_chars) or "(no output)"
        if outcome == "timeout":
            status = f"[timed out after {timeout:g} s; the command's process group was killed]"
            return ToolResult(f"{status}\n{text}", is_error=True)
        code = transport.get_returncode()
        if code is None or code < 0:
            status = f"[killed by signal {-(code or 0)}]" if code else "[exit status unknown]"
        else:
            status = f"[exit code {code}]"
        if outcome == "lingering":
            text += "\n[background processes still holding the output were killed]"
        if room is not None and room < NEARLY_FULL:
            text += (
                f"\n[the disk is nearly full: no file could grow past {room:,} bytes in this "
                "command (signal 25 kills a write past it); the rest is kept free for Perch's "
                "history. Deleting files works; tell the user if space is needed]"
            )
        return ToolResult(f"{status}\n{text}")


def _sandbox_note(sandbox: Sandbox) -> str:
    if sandbox.mode == "none":
        return "Not a sandbox: it runs with the assistant's own user rights."
    net = "with network access" if sandbox.network else "without network access"
    return (
        f"It runs in a sandbox {net}: only the workspace (and /tmp, emptied after each call) "
        "is writable; CPU time, memory, processes and file size are limited."
    )


async def _supervise(proto: _ShellProtocol, cancel: CancelToken, timeout: float) -> str:
    """ "exited", "lingering" (exited, output still held open), "timeout" or "cancelled"."""
    exit_wait = asyncio.ensure_future(proto.exited.wait())
    cancel_wait = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait(
            {exit_wait, cancel_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        exit_wait.cancel()
        cancel_wait.cancel()
    if exit_wait in done:
        try:
            await asyncio.wait_for(proto.eof.wait(), EOF_GRACE_S)
        except TimeoutError:
            return "lingering"
        return "exited"
    return "cancelled" if cancel_wait in done else "timeout"
