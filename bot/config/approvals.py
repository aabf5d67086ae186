"""`agent.approvals`, and the shipped command rules of `agent.exec.ask` / `agent.exec.allow`.

`ApprovalsConfig` itself sits with the other `agent:` models in `bot/config/agent.py`. The shipped rules ask before exec commands that delete, move over or change permissions,
except inside `inbox/` (where received files land), and allow everything else; the pattern
language is `agents.tools.command_words`'. How approvals travel is `bot/approvals/`'s.
"""

from __future__ import annotations

from typing import Literal

from agents.tools.command_words import CommandPattern

ToolVerdict = Literal["allow", "ask", "deny"]

DEFAULT_EXEC_ASK = [
    "rm",
    "rmdir",
    "unlink",
    "shred",
    "mv",
    "chmod",
    "chown",
    "chgrp",
    "find -delete",
    "find -exec*",
    "find -ok*",
]
DEFAULT_EXEC_ALLOW = [
    "rm -* inbox/*",
    "rmdir -* inbox/*",
    "unlink inbox/*",
    "shred -* inbox/*",
    "mv -* inbox/*",
    "chmod -* [0-7][0-7][0-7] [0-7][0-7][0-7][0-7] [ugoa]*[-+=]* [-+=]* inbox/*",
]


def default_exec_ask() -> list[str]:
    return list(DEFAULT_EXEC_ASK)


def default_exec_allow() -> list[str]:
    return list(DEFAULT_EXEC_ALLOW)


def default_tool_policy() -> dict[str, ToolVerdict]:
    return {"default": "allow"}


def check_patterns(patterns: list[str]) -> list[str]:
    """The patterns, stripped, if each reads as one (else ValueError naming it)."""
    patterns = [p.strip() for p in patterns]
    for pattern in patterns:
        CommandPattern.parse(pattern)
    return patterns
