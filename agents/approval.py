"""Asking before a tool runs: the per-tool policy, the exec command rules, and the port the
daemon answers approvals through.

`ToolRules.verdict(name, args, destructive=...)` is pure: `agent.tools.policy` maps tool names
or globs to `allow | ask | deny` (an exact name wins over globs, a longer glob over a shorter
one, `default` over nothing); a tool no entry names and that says it is destructive (an MCP
tool with `destructiveHint`) is asked about when the default is `allow`. For `exec`, the
command line then decides (`agents.tools.command_words`): an `allow` pattern that covers
every command it runs lets it through, an `ask` pattern (or the tool's own `ask`) asks.

`ToolGate.run(tool, args, ctx)` is how the loop runs a tool when approvals are on: the tool's
own result (opened by "[approved by the owner]" when someone was asked), or the result the
model gets instead ("Denied by the owner: ...", or the policy's refusal). It asks through the
`Approver` port (the daemon's approval broker), which sends the card, waits for the tap, and
may remember "always"; the wait races the run's cancel token, so `/stop` ends it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, runtime_checkable

from agents.cancel import CancelToken
from agents.tools.base import Tool, ToolContext, ToolResult
from agents.tools.command_words import CommandPattern, command_needs_asking

Verdict = Literal["allow", "ask", "deny"]
EXEC_TOOL = "exec"
MAX_SUMMARY_CHARS = 600
DENIED = "Denied by the owner: {reason}. It did not run; do not try it another way. Tell the user."
REFUSED = (
    "Error: {tool} is not allowed here (agent.tools.policy says deny). It did not run; tell "
    "the user if it mattered."
)
APPROVED_NOTE = "[approved by the owner]\n"


@runtime_checkable
class MarkedDestructive(Protocol):
    """A tool that says whether it may destroy data (MCP's `destructiveHint`)."""

    destructive: bool


@dataclass(frozen=True, slots=True)
class ToolRules:
    """`agent.tools.policy` with `agent.exec.ask` / `.allow` (see the module docstring)."""

    policy: Mapping[str, Verdict] = field(default_factory=dict)
    exec_ask: tuple[CommandPattern, ...] = ()
    exec_allow: tuple[CommandPattern, ...] = ()

    @classmethod
    def of(
        cls, policy: Mapping[str, Verdict], ask: Iterable[str] = (), allow: Iterable[str] = ()
    ) -> ToolRules:
        return cls(
            dict(policy),
            tuple(CommandPattern.parse(p) for p in ask),
            tuple(CommandPattern.parse(p) for p in allow),
        )

    def named(self, name: str) -> Verdict | None:
        """The verdict an entry gives `name` (exact, else the longest matching glob), or None."""
        if name in self.policy and name != "default":
            return self.policy[name]
        globs = [g for g in self.policy if g != "default" and fnmatchcase(name, g)]
        return self.policy[max(globs, key=len)] if globs else None

    def verdict(self, name: str, args: Mapping[str, Any], *, destructive: bool = False) -> Verdict:
        named = self.named(name)
        default = self.policy.get("default", "allow")
        tool_verdict = named or ("ask" if destructive and default == "allow" else default)
        if tool_verdict == "deny" or name != EXEC_TOOL:
            return tool_verdict
        command = args.get("command")
        if not isinstance(command, str):
            return tool_verdict  # the tool refuses it itself
        asked = command_needs_asking(
            command, self.exec_ask, self.exec_allow, ask_all=tool_verdict == "ask"
        )
        return "ask" if asked else "allow"


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approver is asked: `summary` is what would run, cut and with secrets masked;
    `remember_key` is what an "always" answer remembers (the command line, or the tool)."""

    tool: str
    summary: str
    remember_key: str
    session_key: str
    origin: str | None
    requester: str | None
    run_id: str


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    approved: bool
    reason: str = ""  # why not: "the owner said no", "no answer within 5 minutes", ...


class Approver(Protocol):
    """The daemon's side: ask someone, wait for the answer (the gate races `cancel`)."""

    async def ask(self, request: ApprovalRequest, cancel: CancelToken) -> ApprovalAnswer: ...


class ToolGate:
    """The check before each tool call (see the module docstring)."""

    def __init__(self, rules: ToolRules, approver: Approver | None) -> None:
        self.rules = rules
        self.approver = approver

    async def run(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """The tool's result if it may run (asking first where needed), else why not."""
        refusal = await self.check(tool, args, ctx)
        if refusal is not None:
            return refusal
        result = await tool.run(args, ctx)
        if not self._asked(tool, args):
            return result
        return replace(result, content=APPROVED_NOTE + result.content)

    def _asked(self, tool: Tool, args: Mapping[str, Any]) -> bool:
        destructive = isinstance(tool, MarkedDestructive) and tool.destructive is True
        return self.rules.verdict(tool.name, args, destructive=destructive) == "ask"

    async def check(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolResult | None:
        """None if the tool may run now (allowed, or approved), else the result to give."""
        destructive = isinstance(tool, MarkedDestructive) and tool.destructive is True
        verdict = self.rules.verdict(tool.name, args, destructive=destructive)
        if verdict == "allow":
            return None
        if verdict == "deny":
            return ToolResult(REFUSED.format(tool=tool.name), True)
        if self.approver is None:
            return ToolResult(DENIED.format(reason="nobody can approve it here"), True)
        request = ApprovalRequest(
            tool=tool.name,
            summary=describe_call(tool.name, args),
            remember_key=remember_key(tool.name, args),
            session_key=ctx.session_key,
            origin=ctx.origin,
            requester=ctx.requester,
            run_id=ctx.run_id,
        )
        async with ctx.pause() if ctx.pause is not None else nullcontext():
            answer = await ctx.cancel.race(self.approver.ask(request, ctx.cancel))  # Cancelled
        if answer.approved:
            return None
        return ToolResult(DENIED.format(reason=answer.reason or "the owner said no"), True)


def remember_key(tool: str, args: Mapping[str, Any]) -> str:
    """What "always for this command in this chat" remembers."""
    command = args.get("command")
    if tool == EXEC_TOOL and isinstance(command, str):
        return f"{tool}:{command.strip()}"
    return tool


def describe_call(tool: str, args: Mapping[str, Any], limit: int = MAX_SUMMARY_CHARS) -> str:
    """What would run, for a person: the command line for exec, else the tool and its
    arguments as JSON; secrets masked, cut to `limit` characters."""
    command = args.get("command")
    if tool == EXEC_TOOL and isinstance(command, str):
        text = command.strip()
    else:
        shown = json.dumps(args, ensure_ascii=False, default=str, sort_keys=True)
        text = f"{tool} {shown}"
    text = mask_secrets(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SECRET_SHAPES = [
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{8,}"),
    re.compile(r"\bxapp-[A-Za-z0-9-]{8,}"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b\d{6,12}:[A-Za-z0-9_-]{30,}"),  # a Telegram bot token
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)://[^/\s:@]+:[^/\s@]+@"),  # user:password@ in a URL
]
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)((?:api[_-]?key|token|secret|password|passwd|pwd|auth)[\"']?\s*[:=]\s*[\"']?)"
    r"([^\s\"',}]{4,})"
)
_LONG_OPAQUE = re.compile(r"\b[A-Za-z0-9+/_-]{40,}={0,2}")


def mask_secrets(text: str) -> str:
    """`text` with things that look like credentials replaced by `***`."""
    text = _SECRET_ASSIGNMENT.sub(lambda m: m.group(1) + "***", text)
    for shape in _SECRET_SHAPES:
        text = shape.sub("***", text)
    return _LONG_OPAQUE.sub("***", text)
