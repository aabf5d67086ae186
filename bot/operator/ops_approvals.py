"""`perch approvals`: the audit of approvals for risky tools, newest first.

`op_approvals` reads the store's `Approvals` role (the last `limit` requests, 50 by default):
as text one line per request (when, id, decision, tool, who asked and who answered, what
would have run); with `json` one object (`approvals`: the rows) the dashboard shows too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from bot.operator.reply import OpContext, Reply

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


async def op_approvals(ctx: OpContext, args: dict[str, Any]) -> Reply:
    try:
        limit = int(args.get("limit") or DEFAULT_LIMIT)
    except (TypeError, ValueError):
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        return Reply(
            2, err=f"perch approvals: --limit must be a whole number from 1 to {MAX_LIMIT}\n"
        )
    rows = await ctx.store.approvals(limit)
    if args.get("json"):
        return Reply(0, json.dumps({"approvals": [asdict(r) for r in rows]}, indent=1) + "\n")
    if not rows:
        return Reply(0, "No approval requests yet.\n")
    lines = [f"{'WHEN (UTC)':19}  {'ID':6}  {'DECISION':9}  {'TOOL':14}  BY / WHAT"]
    for row in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row.created_at))
        decision = row.status + ("*" if row.remembered else "")
        who = row.decided_by or row.reason or "-"
        summary = row.summary.replace("\n", " ")
        summary = summary if len(summary) <= 60 else summary[:59] + "…"
        lines.append(f"{when:19}  {row.id:6}  {decision:9}  {row.tool[:14]:14}  {who}: {summary}")
    if any(r.remembered for r in rows):
        lines.append("* approved for good in that chat (agent.approvals.remember)")
    return Reply(0, "\n".join(lines) + "\n")
