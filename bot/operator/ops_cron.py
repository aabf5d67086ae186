"""`perch cron list|add|rm` as control operations, daemon running or not.

With the daemon running, a job added is planned at once and a removed one unplanned; without
it the tables are edited directly and a daemon started later loads them. An `--every` below
one minute needs `--allow-fast` (each run is a model call).
"""

from __future__ import annotations

import time
from typing import Any, cast

from agents.tools.cron import CronRequest, ScheduleKind, SessionMode
from bot.config.schema import Config
from bot.cron.jobs import CronJob, CronJobs, create_job, describe_target
from bot.cron.schedule import format_time
from bot.fleet.cron_scope import agent_of_creator, cli_creator
from bot.kernel.routing import decode_chat
from bot.operator.ops_agents import agent_problem
from bot.operator.reply import OpContext, Reply

CLI_MIN_EVERY = 60.0  # below this a job must say --allow-fast


def _agent_of(ctx: OpContext, args: dict[str, Any]) -> tuple[str, str | None]:
    """The --agent given ("" for none) and the problem with it, if any."""
    agent = str(args.get("agent") or "")
    return agent, agent_problem(ctx.config, agent, "cron")


def _belongs(ctx: OpContext, agent: str, created_by: str) -> bool:
    return not agent or agent_of_creator(created_by, ctx.config.agent.id) == agent


async def op_cron_list(ctx: OpContext, args: dict[str, Any]) -> Reply:
    agent, problem = _agent_of(ctx, args)
    if problem:
        return Reply(2, err=problem)
    jobs = CronJobs(ctx.store)
    found = [job for job in await jobs.all() if _belongs(ctx, agent, job.created_by)]
    if not found:
        return Reply(
            0, "No cron jobs. Add one with: perch cron add --at +1h -m 'Remind me to stretch'\n"
        )
    lines: list[str] = []
    for job in found:
        name = f" '{job.name}'" if job.name else ""
        owner = agent_of_creator(job.created_by, ctx.config.agent.id)
        lines.append(
            f"{job.id}{name}  {job.schedule.describe()}  [{job_state(job)}]  agent: {owner}"
        )
        next_run = (
            format_time(job.next_run_at, job.schedule.tz)
            if job.enabled and job.next_run_at is not None
            else "-"
        )
        lines.append(
            f"  next run: {next_run} · session: {job.session_mode} · result to: "
            f"{describe_target(job.deliver_to)}"
        )
        lines.append(f"  message: {_one_line(job.message)}")
        for run in await jobs.runs(job.id, max(int(args.get("runs", 3)), 0)):
            when = format_time(run.started_at, job.schedule.tz)
            detail = f" ({_one_line(run.detail)})" if run.detail else ""
            lines.append(f"  run {when}: {run.status}{detail}")
    return Reply(0, "\n".join(lines) + "\n")


def job_state(job: CronJob) -> str:
    if job.enabled:
        return f"active, retrying ({job.failures} failed)" if job.failures else "active"
    if job.last_status == "missed":
        return "MISSED"
    if job.schedule.one_shot and job.last_status in ("ok", "delivered"):
        return "done"
    return f"disabled (last: {job.last_status})" if job.last_status else "disabled"


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def op_cron_add(ctx: OpContext, args: dict[str, Any]) -> Reply:
    agent, problem = _agent_of(ctx, args)
    if problem:
        return Reply(2, err=problem)
    session: SessionMode = "chat" if args.get("session") == "chat" else "isolated"
    request = CronRequest(
        kind=cast(ScheduleKind, str(args.get("kind", ""))),
        expr=str(args.get("expr", "")),
        message=str(args.get("message", "")),
        tz=args.get("tz") or None,
        name=str(args.get("name") or ""),
        session=session,
        deliver_to=str(args.get("to") or "owner"),
        created_by=cli_creator(agent, ctx.config.agent.id),
        allow_fast=bool(args.get("allow_fast")),
    )
    try:
        job = await create_job(
            CronJobs(ctx.store),
            request,
            default_tz=ctx.config.agent.timezone,
            now=time.time(),
            min_every=CLI_MIN_EVERY,
        )
    except ValueError as exc:
        hint = " (or pass --allow-fast)" if "allow_fast" in str(exc) else ""
        return Reply(2, err=f"perch cron add: {exc}{hint}\n")
    next_run = format_time(job.next_run_at, job.schedule.tz) if job.next_run_at else "-"
    out = (
        f"Added job {job.id}: {job.schedule.describe()}, next run {next_run}, result to "
        f"{describe_target(job.deliver_to)}.\n"
    )
    warning = _channel_warning(ctx.config, job.deliver_to)
    err = f"Warning: {warning}\n" if warning else ""
    if ctx.live is not None:
        await ctx.live.sync_cron()
        out += "Scheduled in the running daemon.\n"
    else:
        out += "Perch is not running; the job is scheduled when it starts.\n"
    return Reply(0, out, err)


def _channel_warning(config: Config, deliver_to: str) -> str:
    chat = decode_chat(deliver_to)
    channel = chat.channel if chat else deliver_to.partition(":")[0]
    if deliver_to in ("owner", "last", "none") or not channel:
        return ""
    section = config.channels.options(channel)
    if section is not None and not section.enabled:
        return f"channel {channel} is not enabled in the config; the job will fail until it is"
    return ""


async def op_cron_remove(ctx: OpContext, args: dict[str, Any]) -> Reply:
    agent, problem = _agent_of(ctx, args)
    if problem:
        return Reply(2, err=problem)
    jobs = CronJobs(ctx.store)
    theirs = {job.id for job in await jobs.all() if not _belongs(ctx, agent, job.created_by)}
    out, err, missing = "", "", 0
    for job_id in [str(i) for i in args.get("ids", [])]:
        if job_id not in theirs and await jobs.remove(job_id):
            out += f"Removed job {job_id}.\n"
        else:
            missing += 1
            err += f"perch cron rm: no job {job_id!r}; see perch cron list\n"
    if ctx.live is not None:
        await ctx.live.sync_cron()
    return Reply(1 if missing else 0, out, err)
