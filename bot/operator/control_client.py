"""The CLI side of the control socket: ask the running daemon, or do it here without one.

`run_command(args, op, payload)` loads the config leniently (no secret is needed), sends
`{"op": ..., "args": {...}}` as one JSON line to the daemon's socket and prints the one-line
JSON answer (a `Reply`). When nothing listens there (no socket, or a stale one left by a
crash) the same operation runs against the database directly, except `send` (only the
daemon can deliver) and `chat`, which then runs one turn in-process (`bot/operator/control_local.py`,
the only path that needs the model key).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from bot.config.load import load_config
from bot.config.paths import config_path, socket_path, status_path
from bot.config.schema import Config
from bot.operator.ops import run_op
from bot.operator.ops_status import unresolved_notes
from bot.operator.reply import OpContext, Reply
from bot.process.status import read_status
from bot.store.open import open_store
from bot.store.rows import StoreUnavailable
from bot.store.urls import redact_url

CONNECT_TIMEOUT = 2.0
ANSWER_TIMEOUT = 30.0  # a chat turn has none: it takes as long as the model does
LINE_LIMIT = 16 * 1024 * 1024
UNBOUNDED = ("chat", "memory.rebuild")  # a model turn; indexing every stored message


async def call(
    path: Path, op: str, args: dict[str, Any], *, timeout: float | None = ANSWER_TIMEOUT
) -> Reply | None:
    """The daemon's answer, or None when no daemon listens on `path`."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=LINE_LIMIT), CONNECT_TIMEOUT
        )
    except (OSError, TimeoutError):
        return None  # no socket, or one left by a daemon that died
    try:
        writer.write(json.dumps({"op": op, "args": args}).encode() + b"\n")
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
    except TimeoutError:
        return Reply(1, err=f"perch: the daemon did not answer within {timeout:g} s ({path})\n")
    except (OSError, asyncio.LimitOverrunError, ValueError) as exc:
        return Reply(1, err=f"perch: the control socket {path} failed: {exc}\n")
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    if not line:
        return Reply(1, err=f"perch: the daemon closed {path} without answering; see its log\n")
    try:
        return Reply.from_json(json.loads(line))
    except ValueError:
        return Reply(1, err="perch: the daemon sent an answer I cannot read\n")


def run_command(args: argparse.Namespace, op: str, payload: dict[str, Any]) -> int:
    """Run `op` for a CLI command and print its reply; the exit code is the reply's."""
    path = config_path(getattr(args, "config", None))
    config = load_config(path, lenient=True)
    reply = asyncio.run(dispatch(config, op, payload))
    if reply.out:
        sys.stdout.write(reply.out)
        sys.stdout.flush()
    if reply.err:
        sys.stderr.write(reply.err)
    return reply.code


async def dispatch(config: Config, op: str, payload: dict[str, Any]) -> Reply:
    timeout = None if op in UNBOUNDED else ANSWER_TIMEOUT
    reply = await call(socket_path(config), op, payload, timeout=timeout)
    if reply is not None:
        return reply
    if op == "chat":
        from bot.operator.control_local import chat_standalone  # loads the agent

        return await chat_standalone(
            config, str(payload["text"]), payload.get("session"), payload.get("agent")
        )
    notes = unresolved_notes(config)
    if op == "status":
        payload = {**payload, "offline_status": read_status(status_path(config))}
        if not config.store.url and not config.db_path.exists():
            if payload.get("json"):
                return _not_running(f"no database yet at {config.db_path}")
            lines = [f"Perch is not running (no database yet at {config.db_path}).", *notes]
            return Reply(0, "\n".join(lines) + "\n")

    try:
        store = await open_store(config.store_target)
    except StoreUnavailable as exc:
        where = redact_url(str(config.store_target))
        if op == "status" and payload.get("json"):
            return _not_running(f"database {where}: {exc}")
        if op == "status":
            lines = ["Perch is not running.", f"  database: {where}: {exc}", *notes]
            return Reply(0, "\n".join(lines) + "\n")
        return Reply(1, err=f"perch: the database {where} is unavailable: {exc}\n")
    try:
        return await run_op(OpContext(config, store), op, payload)
    finally:
        await store.close()


def _not_running(why: str) -> Reply:
    """`perch status --json` with no daemon and no database to read."""
    return Reply(0, json.dumps({"running": False, "note": why}, indent=1) + "\n")
