"""What an approver sees and types: the request's text, its buttons, the text fallback with
`/approve <id>` / `/deny <id>`, the card's text once decided, and reading those commands.

Pure functions; `bot/approvals/broker.py` sends and edits what they write.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from agents.approval import ApprovalRequest
from bot.store.rows import ApprovalRow, ApprovalStatus
from channels.base import ChoiceOption

APPROVE, ALWAYS, DENY = "approve", "always", "deny"
_ID_LETTERS = "abcdefghjkmnpqrstuvwxyz23456789"  # no 0/o, 1/l/i: read aloud, typed on a phone
_ID = re.compile(r"^[a-z0-9]{4,16}$")


def new_approval_id() -> str:
    return "".join(secrets.choice(_ID_LETTERS) for _ in range(6))


def buttons(remember: bool) -> tuple[ChoiceOption, ...]:
    options = [ChoiceOption(APPROVE, "Approve", "primary")]
    if remember:
        options.append(ChoiceOption(ALWAYS, "Always in this chat"))
    options.append(ChoiceOption(DENY, "Deny", "danger"))
    return tuple(options)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:g} seconds"
    return f"{seconds / 60:g} minutes"


def request_text(
    approval_id: str,
    request: ApprovalRequest,
    where: str,
    timeout: float,
    *,
    typed: bool,
    remember: bool,
) -> str:
    """The request as the approver reads it (`typed`: the platform has no buttons)."""
    what = "Run this command?" if request.tool == "exec" else f"Use the tool {request.tool}?"
    lines = [f"Approval needed ({approval_id}): {what}", "", request.summary, "", where]
    if typed:
        always = (
            f" (/approve {approval_id} always: also from now on in that chat)" if remember else ""
        )
        lines.append(f"Reply /approve {approval_id}{always} or /deny {approval_id}.")
    lines.append(f"No answer within {_minutes(timeout)} is a denial.")
    return "\n".join(lines)


def where_text(origin_name: str, requester: str | None) -> str:
    by = f" by {requester}" if requester else ""
    return f"Asked{by} in {origin_name}."


def decided_text(card_text: str, row: ApprovalRow) -> str:
    """The card once decided: its text, the buttons gone, the decision under it."""
    lines = card_text.splitlines()
    kept = [line for line in lines if not line.startswith(("Reply /approve", "No answer within"))]
    return "\n".join(kept).rstrip() + "\n\n" + outcome_line(row)


def outcome_line(row: ApprovalRow) -> str:
    by = row.decided_by.partition(":")[2] or row.decided_by
    lines: dict[ApprovalStatus, str] = {
        "approved": f"Approved by {by}" + (" (always in that chat)" if row.remembered else ""),
        "denied": f"Denied by {by}",
        "timeout": "No answer in time: denied",
        "cancelled": "Stopped before an answer: not run",
        "restart": "The daemon restarted before an answer: denied",
        "pending": "Waiting",
    }
    return lines[row.status] + "."


@dataclass(frozen=True, slots=True)
class TypedAnswer:
    """`/approve <id> [always]` or `/deny <id>`, read."""

    approval_id: str
    approve: bool
    always: bool = False


def read_command(name: str, argument: str) -> TypedAnswer | str:
    """The answer a command gives, or the line saying how to write it."""
    words = argument.lower().split()
    usage = f"Write /{name} <id>" + (" (or /approve <id> always)" if name == "approve" else "")
    if not words or not _ID.match(words[0]):
        return usage + ": the id is in the approval request."
    always = name == "approve" and words[1:] == ["always"]
    if words[1:] and not always:
        return usage + "."
    return TypedAnswer(words[0], name == "approve", always)
