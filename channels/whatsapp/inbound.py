"""Webhook events turned into what the adapter acts on: `Inbound` messages for the gateway,
and delivery statuses of the bot's own messages.

`read_events(payload, phone_number_id)` walks Meta's envelope (`entry[].changes[].value`,
field `messages`) for our number only and returns the raw message and status objects with
the sender's profile name. `WhatsAppNormaliser` makes one `Inbound` of a message: text,
replies (the quoted text when the bot still knows it), images downloaded by media id for the
model, voice notes and audio as audio attachments (transcribed by the daemon), documents and
videos as files for the workspace inbox, locations, contacts and button replies as text.
Reactions, system and unsupported messages are dropped (None).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from channels.base import Attachment, ChatRef, Image, Inbound, image_too_large
from channels.whatsapp.api import GraphApi, GraphError

log = logging.getLogger("channels.whatsapp")

SUPPORTED_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/webp", "image/gif"})
# Names speech-to-text services accept for WhatsApp's audio types (a name without one is refused).
_AUDIO_EXTENSIONS = {
    "audio/ogg": ".ogg",
    "audio/opus": ".ogg",
    "audio/mpeg": ".mp3",
    "audio/mp4": ".m4a",
    "audio/aac": ".m4a",
    "audio/amr": ".amr",
}
_QUOTE_CHARS = 200
_REMEMBERED = 512


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One message object of a webhook post, with the profile name Meta sent beside it."""

    data: Mapping[str, Any]
    profile_name: str


@dataclass(frozen=True, slots=True)
class Status:
    """A status callback for a message the bot sent: sent, delivered, read or failed."""

    message_id: str
    status: str
    recipient: str
    error_code: int
    error: str


@dataclass(frozen=True, slots=True)
class Events:
    messages: list[RawMessage]
    statuses: list[Status]


def read_events(payload: Any, phone_number_id: str) -> Events:
    """The messages and statuses of a webhook body that concern `phone_number_id`."""
    messages: list[RawMessage] = []
    statuses: list[Status] = []
    entries = payload.get("entry") if isinstance(payload, Mapping) else None
    for entry in entries if isinstance(entries, list) else []:
        changes = entry.get("changes") if isinstance(entry, Mapping) else None
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, Mapping) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, Mapping):
                continue
            metadata = value.get("metadata")
            number = metadata.get("phone_number_id") if isinstance(metadata, Mapping) else None
            if str(number) != phone_number_id:
                continue  # another number of the same Meta app
            names = _profile_names(value.get("contacts"))
            for message in _mappings(value.get("messages")):
                sender = str(message.get("from") or "")
                messages.append(RawMessage(message, names.get(sender, "")))
            statuses.extend(_status(s) for s in _mappings(value.get("statuses")))
    return Events(messages, statuses)


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _profile_names(contacts: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    for contact in _mappings(contacts):
        profile = contact.get("profile")
        name = profile.get("name") if isinstance(profile, Mapping) else None
        if contact.get("wa_id") and name:
            names[str(contact["wa_id"])] = str(name)
    return names


def _status(data: Mapping[str, Any]) -> Status:
    errors = _mappings(data.get("errors"))
    first = errors[0] if errors else {}
    details = first.get("error_data")
    detail = details.get("details") if isinstance(details, Mapping) else None
    code = first.get("code")
    return Status(
        str(data.get("id") or ""),
        str(data.get("status") or ""),
        str(data.get("recipient_id") or ""),
        code if isinstance(code, int) else 0,
        " ".join(str(detail or first.get("title") or first.get("message") or "").split())[:300],
    )


class RecentTexts:
    """The last few hundred message texts by id, both ways, so a reply can quote what it
    answers (WhatsApp's reply context names only the id)."""

    def __init__(self, size: int = _REMEMBERED) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()
        self._size = size

    def remember(self, message_id: str, text: str) -> None:
        if not message_id:
            return
        self._texts[message_id] = text
        self._texts.move_to_end(message_id)
        while len(self._texts) > self._size:
            self._texts.popitem(last=False)

    def get(self, message_id: str) -> str | None:
        return self._texts.get(message_id)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._texts


class WhatsAppNormaliser:
    """Makes `Inbound`s for channel `channel` on the business number `account`."""

    def __init__(
        self,
        api: GraphApi,
        *,
        channel: str,
        account: str,
        recent: RecentTexts,
        sent: RecentTexts,
        max_image_bytes: int,
        max_file_bytes: int,
        media_timeout: float,
    ) -> None:
        self._api = api
        self._channel = channel
        self._account = account
        self._recent = recent
        self._sent = sent
        self._max_image_bytes = max_image_bytes
        self._max_file_bytes = max_file_bytes
        self._media_timeout = media_timeout

    async def normalise(self, raw: RawMessage) -> Inbound | None:
        message = raw.data
        kind = str(message.get("type") or "")
        sender = str(message.get("from") or "")
        message_id = str(message.get("id") or "")
        if not sender or not message_id or kind in ("reaction", "system", "unsupported", ""):
            if kind == "unsupported":
                log.info("WhatsApp: a message type the Cloud API does not deliver; ignored")
            return None
        text, images, attachments = await self._content(kind, message)
        if text is None:
            log.info("WhatsApp: a %s message; ignored", kind)
            return None
        self._recent.remember(message_id, text)
        return Inbound(
            chat=ChatRef(self._channel, self._account, "dm", sender, reply_to=message_id),
            sender_id=sender,
            text=self._with_quote(message.get("context"), text),
            message_id=message_id,
            sender_name=raw.profile_name,
            mentioned=True,  # every WhatsApp chat of the Cloud API is a DM with the bot
            images=tuple(images),
            attachments=tuple(attachments),
        )

    def _with_quote(self, context: Any, text: str) -> str:
        if not isinstance(context, Mapping) or not context.get("id"):
            return text
        quoted_id = str(context["id"])
        quoted = self._sent.get(quoted_id) or self._recent.get(quoted_id)
        if quoted is None:
            return text
        short = " ".join(quoted.split())
        if len(short) > _QUOTE_CHARS:
            short = short[: _QUOTE_CHARS - 1] + "…"
        return f"[in reply to: {short}]\n{text}"

    async def _content(
        self, kind: str, message: Mapping[str, Any]
    ) -> tuple[str | None, list[Image], list[Attachment]]:
        body = message.get(kind)
        body = body if isinstance(body, Mapping) else {}
        if kind == "text":
            return str(body.get("body") or ""), [], []
        caption = str(body.get("caption") or "")
        if kind in ("image", "sticker"):
            return await self._image(body, caption)
        if kind in ("audio", "voice"):
            media_type = str(body.get("mime_type") or "").split(";")[0].strip()
            stem = "voice" if body.get("voice") else "audio"
            name = stem + _AUDIO_EXTENSIONS.get(media_type, ".ogg")
            return caption, [], [await self._file("audio", body, name)]
        if kind in ("document", "video"):
            name = str(body.get("filename") or kind)
            return caption, [], [await self._file("file", body, name)]
        if kind == "location":
            return _location(body), [], []
        if kind == "contacts":
            return _contacts(message.get("contacts")), [], []
        if kind == "button":
            return str(body.get("text") or body.get("payload") or ""), [], []
        if kind == "interactive":
            reply = body.get("button_reply") or body.get("list_reply")
            title = reply.get("title") if isinstance(reply, Mapping) else None
            return (str(title) if title else None), [], []
        return None, [], []

    async def _image(
        self, body: Mapping[str, Any], caption: str
    ) -> tuple[str, list[Image], list[Attachment]]:
        media_type = str(body.get("mime_type") or "").split(";")[0].strip()
        if media_type not in SUPPORTED_IMAGE_TYPES:
            return _joined(caption, f"[image of type {media_type or 'unknown'} not shown]"), [], []
        try:
            data, size = await self._download(str(body.get("id") or ""), self._max_image_bytes)
        except GraphError as exc:
            log.warning("WhatsApp: an image could not be downloaded: %s", exc)
            return _joined(caption, "[image could not be downloaded]"), [], []
        if data is None:
            return _joined(caption, image_too_large(self._max_image_bytes, size)), [], []
        return caption, [Image(media_type, data)], []

    async def _file(
        self, kind: Literal["audio", "file"], body: Mapping[str, Any], name: str
    ) -> Attachment:
        media_type = str(body.get("mime_type") or "application/octet-stream").split(";")[0]
        try:
            data, size = await self._download(str(body.get("id") or ""), self._max_file_bytes)
        except GraphError as exc:
            log.warning("WhatsApp: a %s could not be downloaded: %s", kind, exc)
            data, size = None, None
        return Attachment(kind, name, media_type, data, size)

    async def _download(self, media_id: str, limit: int) -> tuple[bytes | None, int | None]:
        """The media's bytes (None when over `limit`) and its declared size."""
        if not media_id:
            raise GraphError("the message names no media id")
        info = await self._api.media_info(media_id)
        if info.size is not None and info.size > limit:
            return None, info.size
        return await self._api.download(info.url, limit, self._media_timeout), info.size


def _joined(caption: str, note: str) -> str:
    return f"{caption}\n{note}" if caption else note


def _location(body: Mapping[str, Any]) -> str:
    where = f"{body.get('latitude')}, {body.get('longitude')}"
    named = " — ".join(str(body[k]) for k in ("name", "address") if body.get(k))
    return f"[location: {where}{' (' + named + ')' if named else ''}]"


def _contacts(contacts: Any) -> str:
    lines: list[str] = []
    for contact in _mappings(contacts):
        name = contact.get("name")
        shown = name.get("formatted_name") if isinstance(name, Mapping) else None
        phones = [str(p.get("phone")) for p in _mappings(contact.get("phones")) if p.get("phone")]
        lines.append(f"[contact: {shown or '?'}{' ' + ', '.join(phones) if phones else ''}]")
    return "\n".join(lines) or "[contact]"
