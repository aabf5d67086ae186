"""What `perch status|sessions|pairing|cron|chat|send` do, in one place for both paths.

`run_op(ctx, op, args)` serves the daemon's control socket (`bot/control_server.py`, with
`ctx.live` set: live data, and a cron change is planned by the scheduler at once) and the CLI
when no daemon answers (`bot/control_client.py` opens the database itself). A `Reply` is the
rendered text plus an exit code, so the output is the same either way. Nothing here reads a
secret: these commands work with a config whose `${VAR}`s are unset.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bot.budget import Budget, day_start
from bot.config.schema import Config
from bot.sessions import SessionKey
from bot.store.roles import Store
from channels.base import ChatRef

if TYPE_CHECKING:
    from bot.turns import TurnOutcome

CLI_CHAT = ChatRef("cli", "local", "dm", "owner")  # `perch chat` without --session


@dataclass(frozen=True, slots=True)
class Reply:
    """What a command prints: `out` on stdout, `err` on stderr, and its exit code."""

    code: int = 0
    out: str = ""
    err: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Reply:
        code = data.get("code", 1) if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(code, int):
            return cls(1, err="perch: the daemon sent an answer I cannot read\n")
        return cls(code, str(data.get("out", "")), str(data.get("err", "")))


class LiveDaemon(Protocol):
    """What the operations need from a running daemon (`bot/control_server.py`)."""

    def status(self) -> dict[str, Any]: ...

    async def sync_cron(self) -> None: ...

    async def chat(self, text: str, session: str | None) -> Reply: ...

    async def send(self, to: str, text: str) -> Reply: ...

    def budget_line(self, spent: float) -> str: ...


@dataclass(slots=True)
class OpContext:
    config: Config
    store: Store
    live: LiveDaemon | None = None


Op = Callable[[OpContext, dict[str, Any]], Awaitable[Reply]]


SOCKET_NAME = "perch.sock"


def socket_path(config: Config) -> Path:
    """The control socket: in the state directory, next to the database."""
    return config.db_path.with_name(SOCKET_NAME)


def default_chat_key(config: Config) -> SessionKey:
    """The session `perch chat` uses unless given `--session`."""
    return SessionKey.for_chat(config.agent.id, CLI_CHAT)


def turn_reply(outcome: TurnOutcome) -> Reply:
    """What `perch chat` prints for a finished turn: the cleaned reply, or why there is none."""
    from bot.delivery import clean_reply
    from bot.turns import empty_answer

    result = outcome.result
    if outcome.blocked:
        return Reply(1, err="perch chat: the input guard blocked that message\n")
    if result is None:
        return Reply(1, err="perch chat: the turn did not run; see the daemon's log\n")
    if result.status == "cancelled":
        return Reply(1, err="perch chat: the turn was stopped\n")
    if result.status == "error":
        return Reply(1, err=f"perch chat: the model call failed: {result.error}\n")
    text = clean_reply(result.text)  # the delivery path's cleaning and NO_REPLY rules
    if text.strip():
        return Reply(0, text.strip() + "\n")
    if empty_answer(result):  # nothing on stdout either way; say which silence it was
        return Reply(0, err="perch chat: the model sent back an empty answer\n")
    return Reply(0)


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
    from bot.operator.mcp_cli import daemon_mcp_lines

    lines += daemon_mcp_lines(daemon)
    for extra in ("next_heartbeat", "next_cron"):
        if daemon.get(extra):
            lines.append(f"  {extra.replace('_', ' ')}: {daemon[extra]}")
    return lines


async def op_status(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is not None:
        lines = render_daemon(ctx.live.status())
    else:
        offline = args.get("offline_status")
        lines = render_daemon(offline) if isinstance(offline, dict) else ["Perch is not running."]
    today = await ctx.store.usage_since(day_start())
    lines.append(
        f"  today (UTC): {today.input_tokens + today.cache_read_tokens} in / "
        f"{today.output_tokens} out tokens, ${today.cost_usd:.4f}"
    )
    if ctx.live is not None:
        lines.append(ctx.live.budget_line(today.cost_usd))
    else:  # what the daemon would say: PAUSED, or lifted for today (kept in the store)
        budget = Budget(ctx.config.agent.budget, ctx.store)
        lines.append(budget.status_line(await budget.spent_today()))
    from bot.cluster.instances import live_instance_lines

    lines += [f"  instance {line}" for line in await live_instance_lines(ctx.store)]
    return Reply(0, "\n".join([*lines, *unresolved_notes(ctx.config)]) + "\n")


def unresolved_notes(config: Config) -> list[str]:
    """One line per `${VAR}` this command did without (`perch doctor` makes them failures)."""
    return [f"  note: {missing}; not needed here" for missing in config.unresolved]


async def op_sessions(ctx: OpContext, args: dict[str, Any]) -> Reply:
    show_all = bool(args.get("all"))
    rows = await ctx.store.list_sessions(int(args.get("limit", 50)), archived=show_all)
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


async def op_chat(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is None:
        return Reply(1, err="perch chat: the daemon is not running\n")
    session = args.get("session")
    return await ctx.live.chat(str(args.get("text", "")), str(session) if session else None)


async def op_send(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is None:
        return Reply(
            1,
            err="perch send: Perch is not running, and only the running daemon can deliver; "
            "start it with perch run (or systemctl start perch)\n",
        )
    return await ctx.live.send(str(args.get("to", "")), str(args.get("text", "")))


def _ops() -> dict[str, Op]:
    from bot.operator.cron_cli import op_cron_add, op_cron_list, op_cron_remove

    return {
        "status": op_status,
        "sessions": op_sessions,
        "pairing.list": op_pairing_list,
        "pairing.approve": op_pairing_approve,
        "pairing.revoke": op_pairing_revoke,
        "cron.list": op_cron_list,
        "cron.add": op_cron_add,
        "cron.rm": op_cron_remove,
        "chat": op_chat,
        "send": op_send,
    }


async def run_op(ctx: OpContext, op: str, args: dict[str, Any]) -> Reply:
    """Run one named operation; an unknown name is an error reply, never an exception."""
    handler = _ops().get(op)
    if handler is None:
        return Reply(2, err=f"perch: unknown control operation {op!r}\n")
    return await handler(ctx, args)
