"""Pure functions on Signal's wire formats, no I/O: message ids (`"<author>:<timestamp>"`),
`group.<base64>` ids, mention ranges in UTF-16 units, the "styled" text mode of `/v2/send`
and `/cmd@suffix` commands.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

OBJECT_REPLACEMENT = "\ufffc"  # the placeholder a Signal mention occupies in the text

_STYLE_MARKERS = {"BOLD": "**", "ITALIC": "*", "MONOSPACE": "`", "STRIKETHROUGH": "~"}
_STYLED_MODE_CONTROL_CHARS = frozenset("*`~|\\")
_COMMAND_WITH_SUFFIX = re.compile(r"^/([A-Za-z0-9_]+)@\S+")
_BOT_MENTION_SENTINEL = "\x00"


def format_message_id(author: str, timestamp: int) -> str:
    """The `Inbound.message_id` of a Signal message: its author and its sent timestamp."""
    return f"{author}:{timestamp}"


def parse_message_id(message_id: str | None) -> tuple[str, int] | None:
    """Inverse of `format_message_id`; None for anything that is not one."""
    if not message_id:
        return None
    author, sep, stamp = message_id.rpartition(":")
    if not sep or not author or not stamp.isdigit():
        return None
    return author, int(stamp)


def group_id_from_internal(internal_id: str) -> str:
    """The `group.<base64>` recipient id for a group's internal id (as signal-cli-rest-api
    derives it: base64 of the internal id's text)."""
    return "group." + base64.b64encode(internal_id.encode()).decode()


def _utf16_to_index(text: str) -> dict[int, int]:
    """Map UTF-16 offsets (Signal's unit for ranges) to Python string indices."""
    offsets: dict[int, int] = {}
    unit = 0
    for index, char in enumerate(text):
        offsets[unit] = index
        unit += 2 if ord(char) > 0xFFFF else 1
    offsets[unit] = len(text)
    return offsets


def _utf16_span(offsets: Mapping[int, int], start: Any, length: Any) -> tuple[int, int] | None:
    if not isinstance(start, int) or not isinstance(length, int) or start < 0 or length <= 0:
        return None
    begin = offsets.get(start)
    end = offsets.get(start + length)
    if begin is None or end is None or end <= begin:
        return None
    return begin, end


def to_styled_mode(text: str, styles: Sequence[str]) -> tuple[str, str]:
    """Turn plain text and signal-cli style ranges into a `/v2/send` message and `text_mode`.

    `styles` are `"start:length:STYLE"` in UTF-16 units, as `render_signal_text` returns them.
    Returns `(message, "styled")` with `**bold**`, `*italic*`, `` `mono` ``, `~strike~`
    markers, or `(text, "normal")` when styling would lose characters: the server's styled
    parser swallows every `*`, `` ` ``, `~`, `|` and has no reliable escape. Overlapping ranges
    keep the first; spoilers and unknown styles are dropped (the text stays).
    """
    if not styles or any(char in _STYLED_MODE_CONTROL_CHARS for char in text):
        return text, "normal"
    offsets = _utf16_to_index(text)
    ranges: list[tuple[int, int, str]] = []
    for spec in styles:
        parts = spec.split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        marker = _STYLE_MARKERS.get(parts[2].upper())
        span = _utf16_span(offsets, int(parts[0]), int(parts[1]))
        if marker is not None and span is not None:
            ranges.append((span[0], span[1], marker))
    ranges.sort()
    kept: list[tuple[int, int, str]] = []
    for start, end, marker in ranges:
        if kept and start < kept[-1][1]:
            continue
        if kept and marker == "*" and kept[-1][2] == "*" and kept[-1][1] == start:
            # "*a**b*" would read as a bold opener: merge touching italics instead
            kept[-1] = (kept[-1][0], end, marker)
            continue
        kept.append((start, end, marker))
    if not kept:
        return text, "normal"
    pieces: list[str] = []
    position = 0
    for start, end, marker in kept:
        pieces += [text[position:start], marker, text[start:end], marker]
        position = end
    pieces.append(text[position:])
    return "".join(pieces), "styled"


def strip_bot_mentions(
    text: str, mentions: Sequence[Mapping[str, Any]], is_bot: Callable[[Mapping[str, Any]], bool]
) -> tuple[str, bool]:
    """Resolve Signal mention ranges in `text`.

    The bot's own mentions are removed (with the space around them); other people's become
    `@name`. Returns the new text and whether the bot was mentioned. Ranges are UTF-16.
    """
    offsets = _utf16_to_index(text)
    spans: list[tuple[int, int, str]] = []
    mentioned = False
    for mention in mentions:
        if not isinstance(mention, Mapping):
            continue
        span = _utf16_span(offsets, mention.get("start"), mention.get("length"))
        if span is None:
            continue
        if is_bot(mention):
            mentioned = True
            spans.append((span[0], span[1], _BOT_MENTION_SENTINEL))
        else:
            label = mention.get("name") or mention.get("number") or mention.get("uuid") or "someone"
            spans.append((span[0], span[1], f"@{label}"))
    if not spans:
        return text, False
    result = text
    last_start = len(text) + 1
    for start, end, replacement in sorted(spans, reverse=True):
        if end > last_start:  # overlapping ranges: keep the later one only
            continue
        result = result[:start] + replacement + result[end:]
        last_start = start
    if mentioned:
        leading = result.lstrip().startswith(_BOT_MENTION_SENTINEL)
        result = re.sub(rf"[ \t]*{_BOT_MENTION_SENTINEL}[ \t]*", " ", result).strip()
        if leading:
            result = re.sub(r"^[,:;]\s*", "", result)
    return result, mentioned


def normalise_command(text: str) -> str:
    """`/cmd@anything rest` -> `/cmd rest` (Signal has no bot usernames, so any suffix is us)."""
    return _COMMAND_WITH_SUFFIX.sub(r"/\1", text, count=1)
