"""`perch status`, `sessions`, `pairing`, `chat`, `send`, `usage`, `approvals` and `stop`: the commands that
ask the daemon.

Each names one control operation (`bot/operator/ops.py`) and hands it to
`bot/operator/control_client.run_command`, which asks the running daemon over its socket or, when
none runs, does the same against the database (`chat` then runs the turn in-process; `send`
needs the daemon). `register(sub, add)` adds them to the parser (`bot.operator.cli.build_parser`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.operator.control_client import run_command


def cmd_status(args: argparse.Namespace) -> int:
    return run_command(args, "status", {"json": True} if args.json else {})


def cmd_sessions(args: argparse.Namespace) -> int:
    return run_command(
        args, "sessions", {"limit": args.limit, "all": args.all, "agent": args.agent}
    )


def cmd_pairing(args: argparse.Namespace) -> int:
    if args.action == "list":
        return run_command(
            args, "pairing.list", {"channel": args.channel, "approved": args.approved}
        )
    if not args.channel or not args.value:
        what = "CODE" if args.action in ("approve", "deny") else "SENDER_ID"
        print(f"usage: perch pairing {args.action} <channel> <{what}>", file=sys.stderr)
        return 2
    if args.action in ("approve", "deny"):
        op = f"pairing.{args.action}"
        return run_command(args, op, {"channel": args.channel, "code": args.value})
    return run_command(args, "pairing.revoke", {"channel": args.channel, "sender": args.value})


def cmd_usage(args: argparse.Namespace) -> int:
    return run_command(args, "usage", {"days": args.days, "json": args.json, "agent": args.agent})


def cmd_approvals(args: argparse.Namespace) -> int:
    return run_command(args, "approvals", {"limit": args.limit, "json": args.json})


def cmd_stop(args: argparse.Namespace) -> int:
    return run_command(args, "session.stop", {"session": args.session, "all": args.all})


def cmd_chat(args: argparse.Namespace) -> int:
    text = args.message if args.message != "-" else sys.stdin.read()
    if not text.strip():
        print("perch chat: the message is empty", file=sys.stderr)
        return 2
    return run_command(args, "chat", {"text": text, "session": args.session, "agent": args.agent})


def cmd_send(args: argparse.Namespace) -> int:
    text = " ".join(args.text)
    if text == "-":
        text = sys.stdin.read()
    return run_command(args, "send", {"to": args.to, "text": text, "agent": args.agent})


def _agent_flag(parser: Any, what: str) -> None:
    parser.add_argument("--agent", metavar="ID", default=None, help=what)


def register(sub: Any, add: Any) -> None:
    """Add the commands to `perch`'s parser (called by `bot.operator.cli.build_parser`)."""
    st = add("status", cmd_status, "what the running daemon is doing, and today's spend")
    st.add_argument(
        "--json", action="store_true", help="the status as JSON (with metrics and slow turns)"
    )
    s = add("sessions", cmd_sessions, "list conversations, most recent first")
    s.add_argument("--limit", type=int, default=50)
    s.add_argument("--all", action="store_true", help="include archived conversations (/new)")
    _agent_flag(s, "only this agent's conversations (agents:)")
    p = add("pairing", cmd_pairing, "list, approve, deny or revoke senders met through pairing")
    p.add_argument("action", choices=["list", "approve", "deny", "revoke"])
    p.add_argument("channel", nargs="?", help="the channel name (list: optional filter)")
    p.add_argument("value", nargs="?", metavar="CODE|SENDER_ID")
    p.add_argument(
        "--approved", action="store_true", help="list: approved senders, not pending codes"
    )
    u = add("usage", cmd_usage, "tokens and cost per day (UTC) and model, from the usage ledger")
    u.add_argument("--days", type=int, default=30, help="how many days back, today included")
    u.add_argument("--json", action="store_true", help="the rows as JSON")
    _agent_flag(u, "only this agent's sessions (agents:)")
    a = add("approvals", cmd_approvals, "approval requests for risky tools and their decisions")
    a.add_argument("--limit", type=int, default=50, help="how many, newest first")
    a.add_argument("--json", action="store_true", help="the rows as JSON")
    t = add("stop", cmd_stop, "stop a session's reply in progress, as /stop does in the chat")
    t.add_argument("session", help="the session key, as perch sessions shows it")
    t.add_argument("--all", action="store_true", help="every run and waiting message (as /stopall)")
    c = add("chat", cmd_chat, "run one turn and print the reply (through the running daemon)")
    c.add_argument("-m", "--message", required=True, help="what to say ('-' reads stdin)")
    c.add_argument(
        "--session", help="a session key (default agent:<id>:cli:local:dm:owner)", default=None
    )
    _agent_flag(c, "talk to this agent (agents:); default: main")
    d = add("send", cmd_send, "deliver a message to a chat through the running daemon")
    d.add_argument(
        "--to",
        required=True,
        help="CHANNEL:CHAT (a channel key and chat id, as perch sessions shows), or owner",
    )
    d.add_argument("text", nargs="+", help="the message ('-' reads stdin)")
    _agent_flag(d, "checked against the config; a send is your own words, in no session")
