"""The daemon's control socket: `perch status|sessions|pairing|cron|chat|send` talk to it.

A Unix socket `perch.sock` in the state directory (next to the database), mode 0600 so only
the daemon's user may connect; and every connection's peer is checked (`SO_PEERCRED`): only
the daemon's own user and root are answered, whatever the socket's mode (a wider one set by
hand, a descriptor passed on). The state directory is masked in every sandbox, so no command
or MCP server started by the daemon can reach the socket at all. The protocol is one JSON line each way per connection:
`{"op": "status", "args": {}}` in, `{"code": 0, "out": "...", "err": ""}` out (see
`ops.py` for the operations). The socket is bound under a temporary name,
restricted, then renamed into place, so it is never reachable with a wider mode. A socket
file left by a crashed daemon is replaced (the instance lock says no other daemon owns it).
`DaemonControl` is what the operations may ask of the running daemon (`LiveDaemon`), made
from the parts it needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import struct
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agents.surrogates import fix_data
from agents.tools.base import ToolError
from bot.config.schema import Config
from bot.kernel.budget import Budget
from bot.kernel.ports import NOTHING_TO_STOP, ChatCommands, SystemTurns
from bot.kernel.sessions import SessionKey
from bot.observe.telemetry import OFF, Telemetry
from bot.operator.ops import run_op
from bot.operator.ops_chat import default_chat_key, turn_reply
from bot.operator.reply import LiveDaemon, OpContext, Reply
from bot.store.roles import Store
from bot.tools.messages import TargetPolicy
from channels.base import Channel, Outbound

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

LINE_LIMIT = 16 * 1024 * 1024
REQUEST_TIMEOUT = 10.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


class ControlServer:
    """Serves the control socket for one daemon."""

    def __init__(self, path: Path, config: Config, store: Store, live: LiveDaemon) -> None:
        self.path = path
        self.config = config
        self.store = store
        self.live = live
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Listen (a failure is logged; the daemon runs on without its socket)."""
        try:
            await self._listen()
        except OSError as exc:
            log.error("control socket %s could not start: %s", self.path, exc)

    async def _listen(self) -> None:
        path = self.path
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            log.warning(
                "control socket %s: the path is too long for a Unix socket; perch status and "
                "friends will read the database instead (use a shorter store.path)",
                path,
            )
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(temporary), limit=LINE_LIMIT
        )
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
        log.info("control socket listening on %s", path)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._server = None
        self.path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            peer = peer_uid(writer)
            if peer is None or peer not in (os.geteuid(), 0):
                log.warning(
                    "control socket: refused a connection from uid %s (only the daemon's user, "
                    "uid %d, and root may use it)",
                    peer,
                    os.geteuid(),
                )
                with contextlib.suppress(TimeoutError, ValueError, asyncio.LimitOverrunError):
                    await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)  # read, not used
                reply = Reply(2, err="perch: this control socket is not yours\n")
            else:
                reply = await self._answer(reader)
            writer.write(json.dumps(reply.to_json()).encode() + b"\n")
            await writer.drain()
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> Reply:
        try:
            line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)
            # No lone surrogate reaches the store (a chat text's NUL is the input guard's).
            request = fix_data(json.loads(line), keep_nul=True)
        except (TimeoutError, ValueError, asyncio.LimitOverrunError) as exc:
            return Reply(2, err=f"perch: unreadable control request ({type(exc).__name__})\n")
        if not isinstance(request, dict) or not isinstance(request.get("args", {}), dict):
            return Reply(2, err='perch: a control request is {"op": ..., "args": {...}}\n')
        op = str(request.get("op", ""))
        try:
            context = OpContext(self.config, self.store, self.live)
            return await run_op(context, op, request["args"])
        except Exception as exc:
            log.exception("control operation %s failed", op)
            return Reply(1, err=f"perch: the daemon failed to do {op}: {exc}\n")


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED), if known."""
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class CronPlanner(Protocol):
    async def sync(self) -> None: ...


class DaemonControl:
    """`LiveDaemon`: what the operations ask of the running daemon."""

    def __init__(
        self,
        config: Config,
        gateway: SystemTurns,
        scheduler: CronPlanner,
        budget: Budget,
        channels: Mapping[str, Channel],
        status: Callable[[], dict[str, Any]],
        commands: ChatCommands,
        telemetry: Telemetry = OFF,
        *,
        index_writes: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.config = config
        self.index_writes = index_writes  # each agent's index: write the runs that wait
        self.telemetry = telemetry  # `perch send` is a counted send
        self.gateway = gateway
        self.scheduler = scheduler
        self.commands = commands
        self.budget = budget
        self.channels = channels
        self._status = status

    def status(self) -> dict[str, Any]:
        return self._status()

    async def sync_cron(self) -> None:
        await self.scheduler.sync()

    def budget_line(self, spent: float) -> str:
        return self.budget.status_line(spent)

    async def settle_index(self) -> None:
        for write in self.index_writes:
            await write()

    async def stop(self, key: SessionKey, *, everything: bool) -> Reply:
        answer = await self.commands.handle("stopall" if everything else "stop", key)
        return Reply(1 if answer == NOTHING_TO_STOP else 0, f"{answer} ({key})\n")

    async def chat(self, text: str, session: str | None) -> Reply:
        try:
            key = SessionKey.parse(session) if session else default_chat_key(self.config)
        except ValueError as exc:
            return Reply(2, err=f"perch chat: --session: {exc}\n")
        notice = await self.budget.notice() if self.budget.enabled else ""
        if notice:
            return Reply(1, err=f"perch chat: {notice}\n")
        outcome = await self.gateway.run_system_turn(key, text, when_busy="skip", system=False)
        if outcome is None:
            return Reply(
                1,
                err=f"perch chat: session {key} is busy (or Perch is stopping); try again in "
                "a moment\n",
            )
        return turn_reply(outcome)

    async def send(self, to: str, text: str) -> Reply:
        if not text.strip():
            return Reply(2, err="perch send: the message is empty\n")
        policy = TargetPolicy.from_config(self.config, self.channels)
        try:
            chat = policy.resolve(to, None)
        except ToolError as exc:
            return Reply(2, err=f"perch send: --to {to}: {exc}\n")
        channel = self.channels.get(chat.channel)
        if channel is None:
            return Reply(2, err=f"perch send: channel {chat.channel} is not running\n")
        try:  # the owner's own words: sent as written (not model output to clean)
            with self.telemetry.send(chat.channel):
                await channel.send(Outbound(chat, text))
        except Exception as exc:
            return Reply(1, err=f"perch send: delivery to {to} failed: {exc}\n")
        return Reply(0, f"Sent to {to}.\n")
