"""The daemon's control socket: `perch status|sessions|pairing|cron|chat|send` talk to it.

A Unix socket `perch.sock` in the state directory (next to the database), mode 0600 so only
the daemon's user may connect. The protocol is one JSON line each way per connection:
`{"op": "status", "args": {}}` in, `{"code": 0, "out": "...", "err": ""}` out (see
`bot/control_ops.py` for the operations). The socket is bound under a temporary name,
restricted, then renamed into place, so it is never reachable with a wider mode. A socket
file left by a crashed daemon is replaced (the instance lock says no other daemon owns it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from typing import TYPE_CHECKING, Any

from agents.surrogates import fix_data
from agents.tools.base import ToolError
from bot.message_targets import TargetPolicy
from bot.operator.ops import OpContext, Reply, default_chat_key, run_op, socket_path, turn_reply
from bot.sessions import SessionKey
from channels.base import Outbound

if TYPE_CHECKING:
    from bot.daemon import Daemon

log = logging.getLogger(__name__)

LINE_LIMIT = 16 * 1024 * 1024
REQUEST_TIMEOUT = 10.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes


class ControlServer:
    """Serves the control socket for one daemon (and is its `LiveDaemon`)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.path = socket_path(daemon.config)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
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
        store = self.daemon.store
        if store is None:
            return Reply(1, err="perch: the daemon is still starting; try again\n")
        op = str(request.get("op", ""))
        try:
            return await run_op(OpContext(self.daemon.config, store, self), op, request["args"])
        except Exception as exc:
            log.exception("control operation %s failed", op)
            return Reply(1, err=f"perch: the daemon failed to do {op}: {exc}\n")

    # -- LiveDaemon ---------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return self.daemon.status()

    async def sync_cron(self) -> None:
        if self.daemon.scheduler is not None:
            await self.daemon.scheduler.sync()

    def budget_line(self, spent: float) -> str:
        budget = self.daemon.budget
        if budget is None:
            return "  budget: off (agent.budget.daily_usd)"
        return budget.status_line(spent)

    async def chat(self, text: str, session: str | None) -> Reply:
        gateway = self.daemon.gateway
        if gateway is None:
            return Reply(1, err="perch chat: the daemon is still starting; try again\n")
        try:
            key = SessionKey.parse(session) if session else default_chat_key(self.daemon.config)
        except ValueError as exc:
            return Reply(2, err=f"perch chat: --session: {exc}\n")
        budget = self.daemon.budget
        notice = await budget.notice() if budget is not None and budget.enabled else ""
        if notice:
            return Reply(1, err=f"perch chat: {notice}\n")
        outcome = await gateway.run_system_turn(key, text, when_busy="skip", system=False)
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
        policy = TargetPolicy.from_config(self.daemon.config, self.daemon.channels)
        try:
            chat = policy.resolve(to, None)
        except ToolError as exc:
            return Reply(2, err=f"perch send: --to {to}: {exc}\n")
        channel = self.daemon.channels.get(chat.channel)
        if channel is None:
            return Reply(2, err=f"perch send: channel {chat.channel} is not running\n")
        try:  # the owner's own words: sent as written (not model output to clean)
            await channel.send(Outbound(chat, text))
        except Exception as exc:
            return Reply(1, err=f"perch send: delivery to {to} failed: {exc}\n")
        return Reply(0, f"Sent to {to}.\n")


async def start_control(daemon: Daemon) -> ControlServer:
    """Start the daemon's control socket (a failure is logged; the daemon runs on)."""
    server = ControlServer(daemon)
    try:
        await server.start()
    except OSError as exc:
        log.error("control socket %s could not start: %s", server.path, exc)
    return server
