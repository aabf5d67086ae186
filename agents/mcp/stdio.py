"""The stdio transport of an MCP server: Perch's own, so the daemon stays in charge of it.

`stdio_transport(argv, env, cwd, errlog)` starts the server in a session (process group) of its
own with `PR_SET_PDEATHSIG` = SIGKILL, so it dies with the daemon even when the daemon is
`kill -9`ed and the server ignores its closed stdin (a sandboxed server's bwrap dies the same
way and takes its PID namespace with it). It yields the two streams a `ClientSession` talks
through. The server's stdout is read in chunks and each message is cut while it is read
(`cutter.JsonCutter`), never held whole. Its stderr is read line by line (long lines cut),
stripped of control characters and escape sequences, rate-limited (a burst of
`STDERR_BURST`, then `STDERR_PER_S` lines a second, the rest counted and reported once the
server is quiet for a moment or a line is let through again), and logged
as the server's (`mcp.server.<name>`), never raw. Stopping closes stdin, then sends SIGTERM and
SIGKILL to the whole group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from agents.mcp.cutter import JsonCutter

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
STDERR_LINE = 2_000  # characters of one stderr line that are logged
STDERR_BURST = 20
STDERR_PER_S = 2.0
STDERR_QUIET_S = 1.0  # after this long without a line, the count of lines left out is logged
STOP_GRACE_S = 2.0
PR_SET_PDEATHSIG = 1
# C0 and C1 controls, DEL, and what ANSI escape sequences leave once ESC is gone.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _die_with_parent() -> Callable[[], None]:
    """A preexec_fn: SIGKILL when the daemon dies, and not started at all if it already has."""
    parent = os.getpid()
    prctl: Any = None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            prctl = ctypes.CDLL(None, use_errno=True).prctl

    def apply() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the daemon died before the line above took effect
            os._exit(1)

    return apply


def clean_stderr_line(raw: bytes) -> str:
    """One line of a server's stderr as it may be logged: decoded, escape sequences and
    control characters removed, cut to `STDERR_LINE` characters."""
    text = raw.decode("utf-8", errors="replace").rstrip("\r\n").replace("\t", " ")
    text = _CONTROLS.sub("", _ESCAPES.sub("", text)).strip()
    return text if len(text) <= STDERR_LINE else text[:STDERR_LINE] + " [...]"


class StderrLog:
    """Logs a server's stderr lines under its name, a burst and then a few a second."""

    def __init__(self, name: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logging.getLogger(f"mcp.server.{name}")
        self.name = name
        self._clock = clock
        self._tokens = float(STDERR_BURST)
        self._last = clock()
        self.dropped = 0
        self.last = ""  # the last line, for the reason a server that died is shown DOWN

    def line(self, raw: bytes) -> None:
        text = clean_stderr_line(raw)
        if not text:
            return
        self.last = text[:300]
        now = self._clock()
        self._tokens = min(STDERR_BURST, self._tokens + (now - self._last) * STDERR_PER_S)
        self._last = now
        if self._tokens < 1:
            self.dropped += 1
            return
        self._tokens -= 1
        self.flush_dropped()
        self.logger.info("%s", text)

    def flush_dropped(self) -> None:
        if self.dropped:
            self.logger.warning(
                "%d more stderr line(s) of mcp server %s not logged (too many)",
                self.dropped,
                self.name,
            )
            self.dropped = 0


async def _read_stdout(
    stdout: asyncio.StreamReader, send: anyio.abc.ObjectSendStream[Any], name: str
) -> None:
    cutter = JsonCutter()
    async with send:
        while chunk := await stdout.read(CHUNK):
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                cutter.feed(chunk[start:end])
                start = end + 1
                line = cutter.finish()
                if line is None or not line.strip():
                    continue
                try:
                    message: Any = SessionMessage(
                        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    log.debug("mcp server %s sent a line that is not JSON-RPC: %s", name, exc)
                    message = exc
                try:
                    await send.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
            cutter.feed(chunk[start:])


async def _write_stdin(
    stdin: asyncio.StreamWriter,
    receive: anyio.abc.ObjectReceiveStream[SessionMessage],
    reads: anyio.abc.ObjectSendStream[Any],
) -> None:
    try:
        async with receive:
            async for message in receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(data.encode() + b"\n")
                await stdin.drain()
    except (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        await reads.aclose()  # the session sees the connection end instead of a hang


async def _read_stderr(stderr: asyncio.StreamReader, out: StderrLog) -> None:
    while True:
        try:
            line = await asyncio.wait_for(stderr.readuntil(b"\n"), STDERR_QUIET_S)
        except TimeoutError:  # quiet for a moment: say how many lines were left out
            out.flush_dropped()
            continue
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                out.line(exc.partial)
            break
        except asyncio.LimitOverrunError as exc:
            line = await stderr.readexactly(exc.consumed)  # a very long line: its start
        out.line(line)
    out.flush_dropped()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """stdin closed, then SIGTERM, then SIGKILL to the server's whole process group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            return


class MissingWorkdir(ConnectionError):
    """The server's working directory does not exist: nothing could be started in it."""


def _missing(folder: Path) -> bool:
    """No folder there (asked once, after a start failed)."""
    return not folder.is_dir()


@asynccontextmanager
async def stdio_transport(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, errlog: StderrLog
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server and yield (read stream, write stream) for a `ClientSession`; its
    stderr goes to `errlog` (one per server, kept across restarts). A working directory that
    does not exist fails with `MissingWorkdir` (not a "program not found" naming the folder)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**get_default_environment(), **env},
            cwd=cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent(),
            limit=CHUNK,
        )
    except FileNotFoundError:
        if cwd is not None and _missing(cwd):
            raise MissingWorkdir(
                f"working directory not found: {cwd} (the server runs in it; create it, "
                "or for the agent workspace run perch init)"
            ) from None
        raise
    assert process.stdin and process.stdout and process.stderr
    read_send, read_receive = anyio.create_memory_object_stream[Any](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read_stdout, process.stdout, read_send, errlog.name)
        tasks.start_soon(_write_stdin, process.stdin, write_receive, read_send)
        tasks.start_soon(_read_stderr, process.stderr, errlog)
        try:
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                await read_receive.aclose()
                await _stop(process)
            tasks.cancel_scope.cancel()
