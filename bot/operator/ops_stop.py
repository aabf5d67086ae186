"""`perch stop SESSION [--all]`: stop a session's run in progress, as `/stop` does in the chat.

With the daemon running, `op_session_stop` asks it to handle the chat command itself
(`LiveDaemon.stop`: `/stop`, or `/stopall` with `all`), so the run stops wherever it runs:
here, or on another instance sharing the store (a stop request through the store). Without a
daemon here, a shared store still carries the request to the other instances; an unshared one
has nothing running.
"""

from __future__ import annotations

from typing import Any

from bot.cluster.stops import StopRequests
from bot.kernel.sessions import SessionKey
from bot.operator.reply import OpContext, Reply


async def op_session_stop(ctx: OpContext, args: dict[str, Any]) -> Reply:
    text = str(args.get("session") or "")
    everything = bool(args.get("all"))
    try:
        key = SessionKey.parse(text)
    except ValueError as exc:
        return Reply(2, err=f"perch stop: {exc}\n")
    if ctx.live is not None:
        return await ctx.live.stop(key, everything=everything)
    if not ctx.store.shared:
        return Reply(1, err="perch stop: Perch is not running, so nothing runs.\n")
    holders = await StopRequests(ctx.store).stop(str(key), everything=everything)
    if holders:
        return Reply(0, f"Asked the instance running {key} to stop it.\n")
    return Reply(0, f"Nothing runs {key} right now; the other instances were told anyway.\n")
