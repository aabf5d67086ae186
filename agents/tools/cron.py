"""The `cron` tool: the agent schedules, lists and removes its own wake-ups.

Owns the tool's input contract and its checks (clear errors the model can act on) and the
small `CronService` protocol the daemon implements (`bot/cron/book.py` `JobBook`); schedule
parsing, storage and running live in `bot/cron/`. The chat the request came from (`ctx.origin`) is where the
result goes unless `deliver_to` says otherwise.

Decisions: the model may deliver only to `here` (the chat it is talking in), `owner`, `last`
(the most recently active chat) or `none`; sending to an arbitrary chat id is reserved for
`perch cron add --to`, so a prompt injection cannot make a job message strangers. Sub-agents
(depth > 0) get an error: jobs belong to the main agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

from agents.tools.base import ToolContext, ToolError, ToolResult

ScheduleKind = Literal["at", "every", "cron"]
SessionMode = Literal["isolated", "chat"]

MAX_MESSAGE_CHARS = 4000
MAX_NAME_CHARS = 80
DELIVERY_WORDS = ("here", "owner", "last", "none")
_ARGS = (
    "action",
    "name",
    "at",
    "every",
    "cron",
    "tz",
    "message",
    "session",
    "deliver_to",
    "id",
    "allow_fast",
)


@dataclass(frozen=True, slots=True)
class CronRequest:
    """A job to create. `deliver_to` is an encoded chat, `owner`, `last` or `none`;
    `tz` None means the agent's timezone; `created_by` is who asked (a session key)."""

    kind: ScheduleKind
    expr: str
    message: str
    tz: str | None = None
    name: str = ""
    session: SessionMode = "isolated"
    deliver_to: str = "none"
    created_by: str = ""
    allow_fast: bool = False  # `every` below one minute is refused without it (cost guard)


@dataclass(frozen=True, slots=True)
class CronJobView:
    """One job as people and the model see it; times already formatted in the job's tz."""

    id: str
    name: str
    schedule: str
    message: str
    session: SessionMode
    deliver_to: str
    enabled: bool
    next_run: str
    last_status: str = ""
    last_error: str = ""

    def line(self) -> str:
        name = f" '{self.name}'" if self.name else ""
        state = f"next run {self.next_run}" if self.enabled and self.next_run else "not scheduled"
        if self.last_status:
            state += f"; last run: {self.last_status}"
            if self.last_error:
                state += f" ({self.last_error})"
        return (
            f"{self.id}{name}: {self.schedule}, {self.session} session, result to "
            f"{self.deliver_to}; {state}. Message: {self.message}"
        )


class CronService(Protocol):
    """What the tool needs from the daemon's scheduler. Invalid requests raise ValueError
    with a message fit for the model."""

    async def add_job(self, request: CronRequest) -> CronJobView: ...

    async def list_jobs(self, asker: str) -> list[CronJobView]:
        """The jobs the session `asker` may see (the owner: all; others: their own)."""
        ...

    async def remove_job(self, job_id: str, asker: str) -> bool:
        """Remove a job `asker` may see; False when there is none such."""
        ...


def _optional_text(args: dict[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"argument {name!r} must be a string, got {type(value).__name__}")
    return value.strip() or None


class CronTool:
    """`cron {action: add|list|remove, ...}`."""

    name = "cron"
    description = (
        "Add, list or remove scheduled wake-ups. When a job fires you get its message as an "
        "instruction and your reply goes to deliver_to. A reminder ('remind me at 9:00 to "
        "call Alex'): add with at and message 'Remind the user to call Alex.'. Give exactly "
        "one of at, every or cron. Jobs survive restarts."
    )

    def __init__(self, service: CronService) -> None:
        self._service = service
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["add", "list", "remove"]},
                "name": {"type": "string", "description": "Short label (add)."},
                "at": {
                    "type": "string",
                    "description": "One-shot: ISO 8601 (2025-03-01T09:00, read in tz) or +20m.",
                },
                "every": {"type": "string", "description": "Repeat: 30m, 2h, 1d (at least 1m)."},
                "cron": {
                    "type": "string",
                    "description": "5 fields: '0 9 * * 1-5' is 9:00 Mon-Fri.",
                },
                "tz": {"type": "string", "description": "IANA timezone (default: the agent's)."},
                "message": {
                    "type": "string",
                    "description": "Your instruction to yourself for when it fires (add).",
                },
                "session": {
                    "type": "string",
                    "enum": ["isolated", "chat"],
                    "description": "isolated (default): a fresh session each run; chat: in the "
                    "delivery chat's conversation.",
                },
                "deliver_to": {
                    "type": "string",
                    "enum": list(DELIVERY_WORDS),
                    "description": "here (default), owner, last (the latest active chat), none.",
                },
                "id": {"type": "string", "description": "Job id (remove)."},
                "allow_fast": {
                    "type": "boolean",
                    "description": "Allow every below 1m (a model call each run; only if asked).",
                },
            },
            "required": ["action"],
        }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.depth > 0:
            raise ToolError("cron is only available to the main agent, not to sub-agents")
        unknown = sorted(set(args) - set(_ARGS))
        if unknown:
            raise ToolError(
                f"unknown argument(s) {', '.join(unknown)}; cron accepts {', '.join(_ARGS)}"
            )
        action = args.get("action")
        if action == "add":
            return await self._add(args, ctx)
        if action == "list":
            return await self._list(ctx)
        if action == "remove":
            return await self._remove(args, ctx)
        raise ToolError(f"action must be add, list or remove, got {action!r}")

    async def _add(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        given = [(k, v) for k in ("at", "every", "cron") if (v := _optional_text(args, k))]
        if len(given) != 1:
            have = ", ".join(k for k, _ in given) or "none"
            raise ToolError(
                f"give exactly one schedule: at, every or cron (got {have}); e.g. "
                "at='2025-03-01T09:00' or every='1h' or cron='0 9 * * 1-5'"
            )
        kind, expr = given[0]
        message = _optional_text(args, "message")
        if message is None:
            raise ToolError(
                "message is required: what you should do when the job fires, e.g. 'Remind "
                "the user to call Alex.'"
            )
        if len(message) > MAX_MESSAGE_CHARS:
            raise ToolError(
                f"message is {len(message):,} characters; keep it under {MAX_MESSAGE_CHARS:,} "
                "(put long instructions in a workspace file and refer to it)"
            )
        name = _optional_text(args, "name") or ""
        if len(name) > MAX_NAME_CHARS:
            raise ToolError(f"name is longer than {MAX_NAME_CHARS} characters; shorten it")
        session = _optional_text(args, "session") or "isolated"
        if session not in ("isolated", "chat"):
            raise ToolError(f"session must be isolated or chat, got {session!r}")
        where = _optional_text(args, "deliver_to") or "here"
        if where not in DELIVERY_WORDS:
            raise ToolError(
                f"deliver_to must be one of {', '.join(DELIVERY_WORDS)}, got {where!r}; other "
                "chats can only be set by the owner with `perch cron add --to`"
            )
        if where == "here":
            if not ctx.origin:
                raise ToolError(
                    "this run is not in a chat, so deliver_to 'here' has no meaning; use "
                    "owner, last or none"
                )
            where = ctx.origin
        if session == "chat" and where == "none":
            raise ToolError("a chat-session job needs a chat: use deliver_to here, owner or last")
        request = CronRequest(
            kind=cast(ScheduleKind, kind),
            expr=expr,
            message=message,
            tz=_optional_text(args, "tz"),
            name=name,
            session=cast(SessionMode, session),
            deliver_to=where,
            created_by=ctx.session_key,
            allow_fast=args.get("allow_fast") is True,
        )
        try:
            view = await self._service.add_job(request)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return ToolResult(f"Scheduled. {view.line()}")

    async def _list(self, ctx: ToolContext) -> ToolResult:
        jobs = await self._service.list_jobs(ctx.session_key)
        if not jobs:
            return ToolResult("No cron jobs.")
        return ToolResult("\n".join(f"- {job.line()}" for job in jobs))

    async def _remove(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        job_id = _optional_text(args, "id")
        if job_id is None:
            raise ToolError("id is required to remove a job; list the jobs to see their ids")
        if not await self._service.remove_job(job_id, ctx.session_key):
            raise ToolError(f"no cron job with id {job_id!r}; list the jobs to see their ids")
        return ToolResult(f"Removed cron job {job_id}.")
