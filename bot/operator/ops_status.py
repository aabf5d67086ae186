"""`perch status` and `perch sessions`: what the daemon does, what it spent, what it holds.

`render_daemon` turns a daemon's status (live, or its status file) into the lines people
read; with `json` the status is printed as one JSON object instead (`running`, the daemon's
own status with its metrics and slowest recent turns and their trace ids, and `today`);
`unresolved_notes` says which `${VAR}`s the command did without.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agents.pricing import usage_summary
from bot.cluster.instances import live_instance_lines
from bot.config.schema import Config
from bot.kernel.budget import Budget, day_start
from bot.operator.mcp_probe import daemon_mcp_lines
from bot.operator.ops_agents import agent_problem
from bot.operator.reply import OpContext, Reply
from bot.tools.skills import skill_catalog, summary


def render_daemon(daemon: dict[str, Any]) -> list[str]:
    """The running daemon's own status (as `Daemon.status()` reports it)."""
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(daemon.get("started_at", 0)))
    lines = [
        f"Perch is running (pid {daemon.get('pid')}, since {since}), model {daemon.get('model')}"
    ]
    for name, ch in daemon.get("channels", {}).items():
        state = "up" if ch.get("up") else "DOWN"
        lines.append(f"  channel {name}: {state} {ch.get('detail', '')}".rstrip())
    lines.append(
        f"  active runs: {daemon.get('active_runs', 0)}, queued: {daemon.get('queued', 0)}"
    )
    lines += daemon_mcp_lines(daemon)
    for extra in ("next_heartbeat", "next_cron"):
        if daemon.get(extra):
            lines.append(f"  {extra.replace('_', ' ')}: {daemon[extra]}")
    return lines + telemetry_lines(daemon)


def telemetry_lines(daemon: dict[str, Any]) -> list[str]:
    """Where the dashboard and the metrics are, where traces go, and the slowest recent turn."""
    lines = []
    if daemon.get("dashboard"):
        lines.append(f"  dashboard: {daemon['dashboard']}")
    if daemon.get("web_server"):  # webhooks or the API without the dashboard
        lines.append(f"  web server (hooks, api): {daemon['web_server']}")
    if daemon.get("metrics_endpoint"):
        lines.append(f"  metrics: {daemon['metrics_endpoint']}")
    tracing = daemon.get("tracing") or {}
    if tracing.get("enabled"):
        lines.append(
            f"  tracing: to {tracing.get('endpoint')}, collector {tracing.get('collector')}, "
            f"{tracing.get('spans_dropped', 0)} spans dropped"
        )
    for turn in (daemon.get("slow_turns") or [])[:1]:
        trace = f", trace {turn['trace_id']}" if turn.get("trace_id") else ""
        lines.append(
            f"  slowest recent turn: {turn.get('seconds', 0):.1f} s on "
            f"{turn.get('channel')} ({turn.get('outcome')}{trace})"
        )
    return lines


async def status_json(ctx: OpContext, daemon: dict[str, Any] | None) -> Reply:
    """`perch status --json`: the daemon's status dict (or `running: false`) and today's use."""
    today = await ctx.store.usage_since(day_start())
    data = {
        "running": daemon is not None,
        **(daemon or {}),
        "today": {
            "input_tokens": today.input_tokens + today.cache_read_tokens,
            "output_tokens": today.output_tokens,
            "cost_usd": round(today.cost_usd, 6),
        },
    }
    return Reply(0, json.dumps(data, indent=1, sort_keys=True) + "\n")


async def op_status(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if args.get("json"):
        offline = args.get("offline_status")
        live = ctx.live.status() if ctx.live is not None else None
        return await status_json(ctx, live or (offline if isinstance(offline, dict) else None))
    if ctx.live is not None:
        lines = render_daemon(ctx.live.status())
    else:
        offline = args.get("offline_status")
        lines = render_daemon(offline) if isinstance(offline, dict) else ["Perch is not running."]
    today = await ctx.store.usage_since(day_start())
    lines.append(f"  today (UTC): {usage_summary(today)}")  # cache reads and writes priced
    if ctx.live is not None:
        lines.append(ctx.live.budget_line(today.cost_usd))
    else:  # what the daemon would say: PAUSED, or lifted for today (kept in the store)
        budget = Budget(ctx.config.agent.budget, ctx.store)
        lines.append(budget.status_line(await budget.spent_today()))
    lines.append(f"  skills: {summary(skill_catalog(ctx.config).skills())}")
    lines += [f"  instance {line}" for line in await live_instance_lines(ctx.store)]
    return Reply(0, "\n".join([*lines, *unresolved_notes(ctx.config)]) + "\n")


def unresolved_notes(config: Config) -> list[str]:
    """One line per `${VAR}` this command did without (`perch doctor` makes them failures)."""
    return [f"  note: {missing}; not needed here" for missing in config.unresolved]


async def op_sessions(ctx: OpContext, args: dict[str, Any]) -> Reply:
    show_all = bool(args.get("all"))
    agent = str(args.get("agent") or "")  # --agent: that agent's sessions only
    problem = agent_problem(ctx.config, agent, "sessions")
    if problem:
        return Reply(2, err=problem)
    limit = int(args.get("limit", 50))
    rows = await ctx.store.list_sessions(100_000 if agent else limit, archived=show_all)
    if agent:
        rows = [row for row in rows if row.key.startswith(f"agent:{agent}:")][:limit]
    if not rows:
        return Reply(0, "No conversations yet.\n")
    archived: set[str] = set()
    if show_all:
        active = await ctx.store.list_sessions(100_000)
        live_ids = {row.id for row in active}
        archived = {row.id for row in rows if row.id not in live_ids}
    lines = [f"{'UPDATED':16}  {'COST':>9}  SESSION"]
    for s in rows:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated_at))
        mark = "  (archived)" if s.id in archived else ""
        lines.append(f"{when}  ${s.cost_usd:8.4f}  {s.key}{mark}")
    return Reply(0, "\n".join(lines) + "\n")
