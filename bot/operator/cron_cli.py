"""`perch cron list|add|rm`: manage scheduled jobs from the shell, daemon running or not.

With the daemon running the commands go through its control socket (`bot/operator/ops_cron.py`):
a job added is planned at once and a removed one unplanned. Without it they edit the SQLite
tables directly (through `bot/cron/jobs.py`); a daemon started later loads them. `remove`
is an alias of `rm`. An `--every` below one minute needs `--allow-fast` (each run is a model
call). `--agent ID`: list only that agent's jobs, add one that runs as it, remove only its
jobs (`bot/fleet/cron_scope.py`). `register(sub, add)` adds the `cron` subcommand; `bot.operator.cli.build_parser` calls it.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.operator.control_client import run_command


def register(sub: Any, add: Any) -> None:
    """Add `perch cron` to the parser (called by `bot.operator.cli.build_parser`)."""
    cron = add("cron", cmd_cron, "list, add or remove scheduled jobs (wake-ups, reminders)")
    actions = cron.add_subparsers(dest="action", required=True)

    def action(name: str, text: str, aliases: tuple[str, ...] = ()) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = actions.add_parser(
            name, help=text, description=text, aliases=list(aliases)
        )
        p.add_argument("--config", default=argparse.SUPPRESS, help="config file")
        p.add_argument(
            "--agent", metavar="ID", default=None, help="that agent's jobs (agents:); default: all"
        )
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
    if args.action == "list":
        return run_command(args, "cron.list", {"runs": args.runs, "agent": args.agent})
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
            "agent": args.agent,  # the job runs as this agent (default: main)
        }
        return run_command(args, "cron.add", request)
    return run_command(args, "cron.rm", {"ids": args.ids, "agent": args.agent})
