"""Every control operation by name: what `perch status|sessions|pairing|cron|chat|send|mcp|
usage|stop|memory|approvals` do, and every change the dashboard (`bot/web/`) makes.

`run_op(ctx, op, args)` serves the daemon's control socket (`control_server.py`, with
`ctx.live` set: live data, and a cron change is planned by the scheduler at once) and the CLI
when no daemon answers (`control_client.py` opens the database itself). Nothing here reads a
secret: these commands work with a config whose `${VAR}`s are unset.
"""

from __future__ import annotations

from typing import Any

from bot.operator.ops_approvals import op_approvals
from bot.operator.ops_chat import op_chat, op_send
from bot.operator.ops_cron import op_cron_add, op_cron_list, op_cron_remove
from bot.operator.ops_mcp import op_mcp_list
from bot.operator.ops_memory import op_memory_rebuild, op_memory_search
from bot.operator.ops_pairing import (
    op_pairing_approve,
    op_pairing_deny,
    op_pairing_list,
    op_pairing_revoke,
)
from bot.operator.ops_status import op_sessions, op_status
from bot.operator.ops_stop import op_session_stop
from bot.operator.ops_usage import op_usage
from bot.operator.reply import Op, OpContext, Reply

OPS: dict[str, Op] = {
    "status": op_status,
    "sessions": op_sessions,
    "pairing.list": op_pairing_list,
    "pairing.approve": op_pairing_approve,
    "pairing.deny": op_pairing_deny,
    "pairing.revoke": op_pairing_revoke,
    "cron.list": op_cron_list,
    "cron.add": op_cron_add,
    "cron.rm": op_cron_remove,
    "chat": op_chat,
    "send": op_send,
    "mcp.list": op_mcp_list,
    "session.stop": op_session_stop,
    "usage": op_usage,
    "memory.search": op_memory_search,
    "memory.rebuild": op_memory_rebuild,
    "approvals": op_approvals,
}


async def run_op(ctx: OpContext, op: str, args: dict[str, Any]) -> Reply:
    """Run one named operation; an unknown name is an error reply, never an exception."""
    handler = OPS.get(op)
    if handler is None:
        return Reply(2, err=f"perch: unknown control operation {op!r}\n")
    return await handler(ctx, args)
