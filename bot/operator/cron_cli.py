"""`perch cron list|add|rm`: manage scheduled jobs from the shell, daemon running or not.

With the daemon running the commands go through its control socket (`bot/control_ops.py`):
a job added is planned at once and a removed one unplanned. Without it they edit the SQLite
tables directly (through `bot/cron_jobs.py`); a daemon started later loads them. `remove`
is an alias of `rm`. An `--every` below one minute needs `--allow-fast` (each run is a model
call). `register(sub, add)` adds the `cron` subcommand; `bot.operator.cli.build_parser` calls it.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, cast

from agents.tools.cron import CronRequest, ScheduleKind, SessionMode
from bot.config.schema import Config
from bot.cron.jobs import CronJob, CronJobs, create_job, describe_target
from bot.cron.schedule import format_time
from bot.operator.ops import OpContext, Reply
from bot.routing import decode_chat

CLI_MIN_EVERY = 60.0  # below this a job must say --allow-fast


def register(sub: Any, add: Any) -> None:
    """Add `perch cron` to the parser (called by `bot.operator.cli.build_parser`)."""
    cron = add("cron", cmd_cron, "list, add or remove scheduled jobs (wake-ups, reminders)")
    actions = cron.add_subparsers(dest="action", required=True)

    def action(name: str, text: str, aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(
            name, help=text, description=text, aliases=list(aliases)
        )
        p.add_argument("--config", default=argparse.SUPPRESS, help="config file")
        return p

    listing = action("list", "every job with its next run and its last runs")
    listing.add_argument("--runs", type=int, default=3, help="recent runs shown per job")
    adding = action("add", "schedule a job; its result goes to --to (default: the owner)")
    when = adding.add_mutually_exclusive_group(required=True)
    when.add_argument("--at", help="one-shot: ISO time (read in --tz) or +20m")
    when.add_argument("--every", help="repeat: 45s, 10m, 2h, 1d")
    when.add_argument("--cron", help="5-field crontab, e.g. '0 9 * * 1-5'")
    adding.add_argument("--tz", help="IANA timezone (default: agent.timezone)")
    adding.add_argument("-m", "--message", required=True, help="what the agent is asked to do")
    adding.add_argument("--name", default="", help="a short label")
    adding.add_argument("--session", choices=["isolated", "chat"], default="isolated")
    adding.add_argument(
        "--to",
        default="owner",
        help="owner (default), last, none, or a chat: <channel>:<id>, <channel>:group:<id>, ...",
    )
    adding.add_argument(
        "--allow-fast",
        action="store_true",
        help="allow --every below one minute (every run is a model call: mind the cost)",
    )
    removing = action("rm", "remove jobs (and their run history)", aliases=("remove",))
    removing.add_argument("ids", nargs="+", metavar="ID")


def cmd_cron(args: argparse.Namespace) -> int:
    from bot.operator.control_client import run_command

    if args.action == "list":
        return run_command(args, "cron.list", {"runs": args.runs})
    if args.action == "add":
        kind = next(k for k in ("at", "every", "cron") if getattr(args, k))
        request = {
            "kind": kind,
            "expr": getattr(args, kind),
            "message": args.message,
            "tz": args.tz,
            "name": args.name,
            "session": args.session,
            "to": args.to,
            "allow_fast": args.allow_fast,
        }
        return run_command(args, "cron.add", request)
    return run_command(args, "cron.rm", {"ids": args.ids})


async def op_cron_list(ctx: OpContext, args: dict[str, Any]) -> Reply:
    jobs = CronJobs(ctx.store)
    found = await jobs.all()
    if not found:
        return Reply(
            0, "No cron jobs. Add one with: perch cron add --at +1h -m 'Remind me to stretch'\n"
        )
    lines: list[str] = []
    for job in found:
        name = f" '{job.name}'" if job.name else ""
        lines.append(f"{job.id}{name}  {job.schedule.describe()}  [{_state(job)}]")
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


def _state(job: CronJob) -> str:
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
    session: SessionMode = "chat" if args.get("session") == "chat" else "isolated"
    request = CronRequest(
        kind=cast(ScheduleKind, str(args.get("kind", ""))),
        expr=str(args.get("expr", "")),
        message=str(args.get("message", "")),
        tz=args.get("tz") or None,
        name=str(args.get("name") or ""),
        session=session,
        deliver_to=str(args.get("to") or "owner"),
        created_by="cli",
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
    jobs = CronJobs(ctx.store)
    out, err, missing = "", "", 0
    for job_id in [str(i) for i in args.get("ids", [])]:
        if await jobs.remove(job_id):
            out += f"Removed job {job_id}.\n"
        else:
            missing += 1
            err += f"perch cron rm: no job {job_id!r}; see perch cron list\n"
    if ctx.live is not None:
        await ctx.live.sync_cron()
    return Reply(1 if missing else 0, out, err)
