"""`perch usage`: tokens and cost per UTC day and per model, from the store's usage ledger.

`op_usage` reads the last `days` days (30 by default, today included) with
`UsageLedger.usage_by_day`; as text one line per day and model with a total, with `json` one
object (`days`, `since`, `rows`) that the dashboard's Usage page draws its charts from.
`agent` (`perch usage --agent ID`) keeps to that agent's sessions.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from bot.kernel.budget import day_start
from bot.operator.ops_agents import agent_problem
from bot.operator.reply import OpContext, Reply

DEFAULT_DAYS = 30
MAX_DAYS = 366


def usage_days(args: dict[str, Any]) -> int | None:
    """The `days` argument as a number of days (1..366), or None when it is not one."""
    given = args.get("days")
    try:
        days = DEFAULT_DAYS if given is None else int(given)
    except (TypeError, ValueError):
        return None
    return days if 1 <= days <= MAX_DAYS else None


async def op_usage(ctx: OpContext, args: dict[str, Any]) -> Reply:
    days = usage_days(args)
    if days is None:
        return Reply(2, err=f"perch usage: --days must be a whole number from 1 to {MAX_DAYS}\n")
    since = day_start() - (days - 1) * 86400
    agent = str(args.get("agent") or "")  # --agent: that agent's sessions only
    problem = agent_problem(ctx.config, agent, "usage")
    if problem:
        return Reply(2, err=problem)
    rows = await ctx.store.usage_by_day(since, session_prefix=f"agent:{agent}:" if agent else "")
    if args.get("json"):
        data = {"days": days, "since": since, "rows": [asdict(r) for r in rows]}
        return Reply(0, json.dumps(data, indent=1) + "\n")
    first = time.strftime("%Y-%m-%d", time.gmtime(since))
    if not rows:
        return Reply(0, f"No usage since {first} (UTC).\n")
    width = max(len(r.model or "-") for r in rows)
    lines = [f"{'DAY (UTC)':10}  {'MODEL':{width}}  {'IN':>10}  {'OUT':>9}  {'COST':>10}"]
    for r in rows:
        tokens_in = r.input_tokens + r.cache_read_tokens + r.cache_write_tokens
        lines.append(
            f"{r.day:10}  {r.model or '-':{width}}  {tokens_in:>10}  {r.output_tokens:>9}  "
            f"${r.cost_usd:>9.4f}"
        )
    total = sum(r.cost_usd for r in rows)
    lines.append(f"Total since {first}: ${total:.4f}")
    return Reply(0, "\n".join(lines) + "\n")
