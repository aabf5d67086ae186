"""Pure functions on what Telegram sends us, no I/O (property-tested).

Owns the reading of an incoming message's text and bytes: UTF-16 entity offsets, stripping the
bot's own mentions, the bot a `/cmd@name` addresses, and the image type its bytes reveal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from telegram import MessageEntity

IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_COMMAND_RE = re.compile(r"^/([A-Za-z0-9_]+)@([A-Za-z0-9_]+)")


def _utf16_to_index(text: str, offset: int) -> int:
    """The Python index of a UTF-16 code unit offset, as Telegram counts entity offsets."""
    units = 0
    for index, char in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def _entity_text(text: str, entity: MessageEntity) -> str:
    start = _utf16_to_index(text, entity.offset)
    end = _utf16_to_index(text, entity.offset + entity.length)
    return text[start:end]


def strip_bot_mentions(
    text: str, entities: Sequence[MessageEntity], username: str, bot_id: int
) -> tuple[str, bool]:
    """Remove the bot's mentions from `text` and say whether there was one.

    A mention is a "mention" entity reading `@username` (any case) or a "text_mention" of the
    bot's user id. A leading `/cmd@username` becomes `/cmd` and also counts as addressing the
    bot. Offsets are Telegram's UTF-16 code units. Text around a removed mention is joined with
    one space, and a "," or ":" left at the very start ("@bot, hi") is dropped.
    """
    handle = "@" + username.lower()
    spans: list[tuple[int, int]] = []
    for entity in entities:
        is_ours = (
            entity.type == MessageEntity.MENTION
            and username
            and _entity_text(text, entity).lower() == handle
        ) or (
            entity.type == MessageEntity.TEXT_MENTION
            and entity.user is not None
            and entity.user.id == bot_id
        )
        if is_ours:
            start = _utf16_to_index(text, entity.offset)
            spans.append((start, _utf16_to_index(text, entity.offset + entity.length)))
    mentioned = bool(spans)
    for start, end in sorted(spans, reverse=True):
        left, right = text[:start].rstrip(), text[end:].lstrip()
        text = f"{left} {right}" if left and right else left + right
    if mentioned:
        text = re.sub(r"^\s*[,:]", "", text)
    text = text.strip()
    command = _COMMAND_RE.match(text)
    if command and username and command.group(2).lower() == username.lower():
        text = "/" + command.group(1) + text[command.end() :]
        mentioned = True
    return text, mentioned


def command_target(text: str) -> str | None:
    """The bot a leading `/cmd@name` is addressed to, if any."""
    match = _COMMAND_RE.match(text.strip())
    return match.group(2) if match else None


def sniff_image_type(data: bytes) -> str | None:
    """The image type the leading bytes (magic number) show, or None if not an image we know."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None
