"""The Messages-API validity check of a history (`validate_history`), and the block kinds
each role may carry, shared with the repair stage of `agents.history`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Messages = Sequence[Mapping[str, Any]]

USER_BLOCKS = frozenset({"text", "image", "document", "tool_result", "search_result"})
ASSISTANT_BLOCKS = frozenset(
    {
        "text",
        "tool_use",
        "thinking",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
    }
)
ROLES = frozenset({"user", "assistant"})


def validate_history(messages: Messages) -> list[str]:
    """Problems that would make the Messages API reject `messages` (empty when valid)."""
    problems: list[str] = []
    if not isinstance(messages, list):
        return ["history is not a list of messages"]
    seen_tool_ids: set[str] = set()
    previous_role: str | None = None
    previous_tool_ids: list[str] = []
    for index, message in enumerate(messages):
        where = f"message {index}"
        if not isinstance(message, dict):
            problems.append(f"{where}: not a dict")
            previous_role, previous_tool_ids = None, []
            continue
        role = message.get("role")
        where = f"message {index} ({role})"
        if role not in ROLES:
            problems.append(f"{where}: role must be 'user' or 'assistant'")
        if index == 0 and role != "user":
            problems.append(f"{where}: the history must start with a user message")
        if previous_role is not None and role == previous_role:
            problems.append(f"{where}: same role as the message before; roles must alternate")
        content = message.get("content")
        if not isinstance(content, list) or not content:
            problems.append(f"{where}: content must be a non-empty list of blocks")
            content = []
        problems += _validate_blocks(where, role, content, seen_tool_ids, previous_tool_ids)
        tool_ids = [
            str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        if previous_tool_ids and role != "user":
            problems.append(f"{where}: tool_use in the message before has no tool_result")
        previous_role, previous_tool_ids = role, tool_ids if role == "assistant" else []
    if previous_tool_ids:
        problems.append(
            f"message {len(messages) - 1} (assistant): tool_use without a following tool_result"
        )
    return problems


def _validate_blocks(
    where: str,
    role: Any,
    content: list[Any],
    seen_tool_ids: set[str],
    expected_ids: list[str],
) -> list[str]:
    problems: list[str] = []
    allowed = USER_BLOCKS if role == "user" else ASSISTANT_BLOCKS
    answered: set[str] = set()
    after_other = False
    for position, block in enumerate(content):
        at = f"{where} block {position}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            problems.append(f"{at}: not a block with a 'type'")
            continue
        kind = block["type"]
        if kind not in allowed:
            problems.append(f"{at}: a {role} message may not carry a {kind!r} block")
            continue
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text.strip():
                problems.append(f"{at}: text blocks must contain non-whitespace text")
        elif kind == "tool_use":
            tool_id = block.get("id")
            if not isinstance(tool_id, str) or not tool_id:
                problems.append(f"{at}: tool_use without an id")
            elif tool_id in seen_tool_ids:
                problems.append(f"{at}: tool_use id {tool_id!r} is used twice")
            else:
                seen_tool_ids.add(tool_id)
            if not isinstance(block.get("name"), str) or not block.get("name"):
                problems.append(f"{at}: tool_use without a name")
            if not isinstance(block.get("input"), dict):
                problems.append(f"{at}: tool_use input must be an object")
        elif kind == "tool_result":
            tool_id = block.get("tool_use_id")
            if after_other:
                problems.append(f"{at}: tool_result blocks must come before any other block")
            if tool_id not in expected_ids:
                problems.append(f"{at}: tool_result {tool_id!r} answers no tool_use before it")
            elif tool_id in answered:
                problems.append(f"{at}: tool_result {tool_id!r} answered twice")
            else:
                answered.add(tool_id)
            result = block.get("content")
            if result is not None and not isinstance(result, str | list):
                problems.append(f"{at}: tool_result content must be a string or a list")
        if kind != "tool_result":
            after_other = True
    for tool_id in expected_ids:
        if role == "user" and tool_id not in answered:
            problems.append(f"{where}: no tool_result for tool_use {tool_id!r}")
    return problems
