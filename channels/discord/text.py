"""Pure functions on what Discord sends us, no I/O (property-tested).

Owns reading a message's content for the model: the bot's own mentions (`<@id>`, `<@!id>`,
or a role the bot holds, `<@&id>`) found and removed, other tokens made readable (`<@id>` ->
`@name`, `<#id>` -> `#name`, `<:emoji:id>` -> `:emoji:`, `<t:1700000000:R>` -> a UTC time),
and `/cmd@botname` turned into `/cmd`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

_TOKEN = re.compile(
    r"<(@!?|@&|#)(\d{1,20})>|<a?:(\w{1,32}):\d{1,20}>|<t:(-?\d{1,13})(?::[tTdDfFR])?>"
)
_COMMAND = re.compile(r"/([A-Za-z0-9_]+)@(\S+?)(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Names:
    """Display names for the ids a message mentions (missing ones show as the id)."""

    users: Mapping[str, str] = field(default_factory=dict)
    roles: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, str] = field(default_factory=dict)


def normalise_discord_text(
    content: str,
    bot_id: str,
    *,
    bot_roles: Collection[str] = (),
    bot_name: str = "",
    names: Names | None = None,
) -> tuple[str, bool]:
    """Discord message content -> text for the model, and whether it mentions the bot.

    The bot's own mentions are removed with a following `:`/`,` and spaces; the result is
    stripped, and `/cmd@<bot_name>` at its start becomes `/cmd`.
    """
    known = names or Names()
    mentioned = False
    parts: list[str] = []
    position = 0
    for match in _TOKEN.finditer(content):
        parts.append(content[position : match.start()])
        position = match.end()
        kind, number, emoji, stamp = match.groups()
        own = (kind in ("@", "@!") and number == bot_id) or (kind == "@&" and number in bot_roles)
        if own:
            mentioned = True
            trailing = re.match(r"[:,]?[ \t]*", content[position:])
            position += trailing.end() if trailing else 0
        elif kind in ("@", "@!"):
            parts.append("@" + known.users.get(number, number))
        elif kind == "@&":
            parts.append("@" + known.roles.get(number, number))
        elif kind == "#":
            parts.append("#" + known.channels.get(number, number))
        elif emoji is not None:
            parts.append(f":{emoji}:")
        else:
            parts.append(_timestamp(int(stamp), match.group()))
    parts.append(content[position:])
    text = "".join(parts).strip()
    command = _COMMAND.match(text)
    if command is not None and bot_name and command.group(2).lower() == bot_name.lower():
        text = f"/{command.group(1)}{text[command.end() :]}"
    return text, mentioned


def _timestamp(seconds: int, raw: str) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return raw
