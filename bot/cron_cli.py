"""`perch cron list|add|rm`: manage scheduled jobs from the shell, daemon running or not.

The commands edit the SQLite tables directly (through `bot/cron_jobs.py`), so they work when
the daemon is down. A running daemon notices jobs added or removed here within 30 s (it
watches `PRAGMA data_version`, which changes when another process commits); a removed job
never runs even before that, because the daemon re-reads a job before running it.
`register(sub, add)` adds the `cron` subcommand; `bot.cli.build_parser` calls it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, cast

from agents.tools.cron import CronRequest, ScheduleKind
from bot.cli import config_path
from bot.config import Config, load_config
from bot.cron_jobs import POLL_EVERY, CronJob, CronJobs, create_job, describe_target
from bot.cron_schedule import format_time
from bot.routing import decode_chat
from bot.store import open_store

CLI_MIN_EVERY = 1.0


def register(sub: Any, add: Any) -> None:
    """Add `perch cron` to the parser (called by `bot.cli.build_parser`)."""
    cron = add("cron", cmd_cron, "list, add or remove scheduled jobs (wake-ups, reminders)")
    actions = cron.add_subparsers(dest="action", required=True)

    def action(name: str, text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(name, help=text, description=text)
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
    removing = action("rm", "remove jobs (and their run history)")
    removing.add_argument("ids", nargs="+", metavar="ID")


def cmd_cron(args: argparse.Namespace) -> int:
    config = load_config(config_path(getattr(args, "config", None)))
    return asyncio.run(_main(config, args))


async def _main(config: Config, args: argparse.Namespace) -> int:
    store = await open_store(config.store_target)
    try:
        jobs = CronJobs(store)
        if args.action == "list":
            return await _list(jobs, args.runs)
        if args.action == "add":
            return await _add(config, jobs, args)
        return await _remove(jobs, args.ids)
    finally:
        await store.close()


async def _list(jobs: CronJobs, runs: int) -> int:
    found = await jobs.all()
    if not found:
        print("No cron jobs. Add one with: perch cron add --at +1h -m 'Remind me to stretch'")
        return 0
    for job in found:
        name = f" '{job.name}'" if job.name else ""
        print(f"{job.id}{name}  {job.schedule.describe()}  [{_state(job)}]")
        next_run = (
            format_time(job.next_run_at, job.schedule.tz)
            if job.enabled and job.next_run_at is not None
            else "-"
        )
        print(
            f"  next run: {next_run} · session: {job.session_mode} · result to: "
            f"{describe_target(job.deliver_to)}"
        )
        print(f"  message: {_one_line(job.message)}")
        for run in await jobs.runs(job.id, max(runs, 0)):
            when = format_time(run.started_at, job.schedule.tz)
            detail = f" ({_one_line(run.detail)})" if run.detail else ""
            print(f"  run {when}: {run.status}{detail}")
    return 0


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


async def _add(config: Config, jobs: CronJobs, args: argparse.Namespace) -> int:
    kind, expr = next((k, getattr(args, k)) for k in ("at", "every", "cron") if getattr(args, k))
    request = CronRequest(
        kind=cast(ScheduleKind, kind),
        expr=expr,
        message=args.message,
        tz=args.tz,
        name=args.name,
        session=args.session,
        deliver_to=args.to,
        created_by="cli",
    )
    try:
        job = await create_job(
            jobs,
            request,
            default_tz=config.agent.timezone,
            now=time.time(),
            min_every=CLI_MIN_EVERY,
        )
    except ValueError as exc:
        print(f"perch cron add: {exc}", file=sys.stderr)
        return 2
    next_run = format_time(job.next_run_at, job.schedule.tz) if job.next_run_at else "-"
    print(
        f"Added job {job.id}: {job.schedule.describe()}, next run {next_run}, result to "
        f"{describe_target(job.deliver_to)}."
    )
    warning = _channel_warning(config, job.deliver_to)
    if warning:
        print(f"Warning: {warning}", file=sys.stderr)
    print(f"A running daemon picks it up within {POLL_EVERY:g} s.")
    return 0


def _channel_warning(config: Config, deliver_to: str) -> str:
    chat = decode_chat(deliver_to)
    channel = chat.channel if chat else deliver_to.partition(":")[0]
    if deliver_to in ("owner", "last", "none") or not channel:
        return ""
    section = config.channels.options(channel)
    if section is not None and not section.enabled:
        return f"channel {channel} is not enabled in the config; the job will fail until it is"
    return ""


async def _remove(jobs: CronJobs, ids: list[str]) -> int:
    missing = 0
    for job_id in ids:
        if await jobs.remove(job_id):
            print(f"Removed job {job_id}.")
        else:
            missing += 1
            print(f"perch cron rm: no job {job_id!r}; see perch cron list", file=sys.stderr)
    return 1 if missing else 0
