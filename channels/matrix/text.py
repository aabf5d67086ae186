"""What a Matrix message says, read as plain text: mentions of the bot found and stripped,
reply fallbacks dropped. Pure functions, table- and property-tested.

A message addresses the bot when its `m.mentions.user_ids` holds the bot's id (what Element
sends for a pill), when its HTML links to the bot (`https://matrix.to/#/@bot:server`, older
clients' pills), or when its body names the bot's user id or display name as a word. The name
is taken out where it opens the message ("Perch: what time is it?" reads "what time is it?").
A reply's fallback (the quoted lines `> <@user:server> ...` that older clients put before the
answer) is dropped from the body; who was replied to comes from `m.relates_to`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def strip_reply_fallback(body: str) -> str:
    """`body` without the leading `> ` lines of a reply fallback and the blank line after."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> <"):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index < len(lines) and not lines[index].strip():
        index += 1
    return "\n".join(lines[index:])


def fallback_sender(body: str) -> str | None:
    """The user a reply fallback quotes (`> <@user:server> ...`), if the body has one."""
    match = re.match(r"> <(@[^>\s]+)>", body)
    return match.group(1) if match else None


def mentions_bot(content: Mapping[str, Any], bot_id: str, bot_name: str) -> bool:
    """True when the message's content addresses the bot (see the module docstring)."""
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict):
        users = mentions.get("user_ids")
        if isinstance(users, list) and bot_id in users:
            return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and f"matrix.to/#/{bot_id}" in formatted:
        return True
    body = content.get("body")
    return isinstance(body, str) and _named(body, bot_id, bot_name) is not None


def strip_mention(text: str, bot_id: str, bot_name: str) -> str:
    """`text` without the bot's name where it opens the message (with a `:` or `,` after)."""
    for name in _names(bot_id, bot_name):
        pattern = re.compile(rf"^\s*@?{re.escape(name)}(?![\w-])\s*[:,]?\s*", re.IGNORECASE)
        stripped, n = pattern.subn("", text, count=1)
        if n:
            return stripped
    return text


def _names(bot_id: str, bot_name: str) -> list[str]:
    names = [bot_id]
    if bot_name.strip() and bot_name.strip() != bot_id:
        names.append(bot_name.strip())
    return names


def _named(body: str, bot_id: str, bot_name: str) -> str | None:
    for name in _names(bot_id, bot_name):
        if re.search(rf"(?<![\w-])@?{re.escape(name)}(?![\w-])", body, re.IGNORECASE):
            return name
    return None
