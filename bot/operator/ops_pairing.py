"""`perch pairing list|approve|deny|revoke`: the senders met through pairing codes."""

from __future__ import annotations

import time
from typing import Any

from bot.operator.reply import OpContext, Reply


async def op_pairing_list(ctx: OpContext, args: dict[str, Any]) -> Reply:
    channel = args.get("channel") or None
    if args.get("approved"):
        approved = await ctx.store.approved_senders(channel)
        if not approved:
            return Reply(0, "No approved senders.\n")
        lines = []
        for chan, sender, at in approved:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
            lines.append(f"{chan:9} {sender}  approved {when}")
        return Reply(0, "\n".join(lines) + "\n")
    requests = await ctx.store.pairing_requests(channel)
    if not requests:
        return Reply(0, "No pending pairing requests.\n")
    lines = []
    for r in requests:
        left = int((r.expires_at - time.time()) / 60)
        name = f" ({r.sender_name})" if r.sender_name else ""
        lines.append(f"{r.channel:9} {r.code}  {r.sender_id}{name}  expires in {left} min")
    return Reply(0, "\n".join(lines) + "\n")


async def op_pairing_approve(ctx: OpContext, args: dict[str, Any]) -> Reply:
    channel, code = str(args.get("channel") or ""), str(args.get("code") or "")
    if not channel or not code:
        return Reply(2, err="usage: perch pairing approve <channel> <CODE>\n")
    approved = await ctx.store.pairing_approve(channel, code)
    if approved is None:
        return Reply(
            1,
            err=f"No pending code {code.upper()} on {channel} (expired or mistyped?). "
            "See: perch pairing list\n",
        )
    return Reply(0, f"Approved {approved.sender_id} on {approved.channel}.\n")


async def op_pairing_revoke(ctx: OpContext, args: dict[str, Any]) -> Reply:
    channel, sender = str(args.get("channel") or ""), str(args.get("sender") or "")
    if not channel or not sender:
        return Reply(2, err="usage: perch pairing revoke <channel> <SENDER_ID>\n")
    if not await ctx.store.pairing_revoke(channel, sender):
        return Reply(
            1,
            err=f"{sender} is not an approved sender on {channel}. "
            "See: perch pairing list --approved\n",
        )
    return Reply(0, f"Revoked {sender} on {channel}: their messages are refused from now on.\n")


async def op_pairing_deny(ctx: OpContext, args: dict[str, Any]) -> Reply:
    channel, code = str(args.get("channel") or ""), str(args.get("code") or "")
    if not channel or not code:
        return Reply(2, err="usage: perch pairing deny <channel> <CODE>\n")
    denied = await ctx.store.pairing_deny(channel, code)
    if denied is None:
        return Reply(
            1,
            err=f"No pending code {code.upper()} on {channel} (expired or mistyped?). "
            "See: perch pairing list\n",
        )
    return Reply(
        0,
        f"Denied code {denied.code} of {denied.sender_id} on {denied.channel}: they stay "
        "refused and get a new code if they write again.\n",
    )
