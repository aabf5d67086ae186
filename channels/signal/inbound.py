"""Receive frames from signal-cli-rest-api turned into `Inbound`: data messages from others
only, group ids resolved through `GET /v1/groups`, mentions and quotes of the bot detected,
images downloaded within the size limit, voice notes and documents within `max_file_bytes`, and the optional read receipt.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Container, Mapping, Sequence
from typing import Any, Literal

from channels.base import Attachment, ChatKind, ChatRef, Image, Inbound, image_too_large
from channels.signal.api import SMALL_REQUEST_TIMEOUT, SignalApi, SignalApiError
from channels.signal.text import (
    format_message_id,
    group_id_from_internal,
    normalise_command,
    parse_message_id,
    strip_bot_mentions,
)

log = logging.getLogger("channels.signal")  # the whole Signal adapter logs under one name

SUPPORTED_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

_GROUP_REFRESH_INTERVAL = 30.0


class SignalNormaliser:
    """Normalises what the receive websocket delivers for `account` on channel `channel`.

    `sent` holds the timestamps of the bot's own recent messages (a quote of one is a mention).
    """

    def __init__(
        self,
        api: SignalApi,
        account: str,
        sent: Container[int],
        *,
        channel: str,
        max_image_bytes: int,
        max_file_bytes: int = 20_000_000,
        send_read_receipts: bool,
    ) -> None:
        self._api = api
        self._account = account
        self._sent = sent
        self._channel = channel
        self._max_image_bytes = max_image_bytes
        self._max_file_bytes = max_file_bytes
        self._send_read_receipts = send_read_receipts
        self._groups: dict[str, str] = {}
        self._groups_refreshed = 0.0
        self._self_uuid: str | None = None

    async def refresh_groups(self) -> None:
        """Best effort: map internal group ids to `group.<base64>` ids."""
        self._groups_refreshed = time.monotonic()
        try:
            status, data, _ = await self._api.request(
                "GET", f"/v1/groups/{self._account}", seconds=SMALL_REQUEST_TIMEOUT
            )
        except SignalApiError as exc:
            log.debug("listing Signal groups failed: %s", exc)
            return
        if status != 200 or not isinstance(data, list):
            log.debug("listing Signal groups answered HTTP %s", status)
            return
        for entry in data:
            if isinstance(entry, Mapping) and entry.get("internal_id") and entry.get("id"):
                self._groups[str(entry["internal_id"])] = str(entry["id"])

    async def _group_chat_id(self, internal_id: str) -> str:
        known = self._groups.get(internal_id)
        if known is None and time.monotonic() - self._groups_refreshed > _GROUP_REFRESH_INTERVAL:
            await self.refresh_groups()
            known = self._groups.get(internal_id)
        return known or group_id_from_internal(internal_id)

    def _is_self(self, number: Any, uuid: Any) -> bool:
        if number and number == self._account:
            return True
        return bool(uuid) and uuid == self._self_uuid

    async def normalise(self, payload: Any) -> Inbound | None:
        """An `Inbound` for a data message from someone else; None for everything else."""
        if not isinstance(payload, Mapping):
            return None
        if "envelope" not in payload:
            if payload.get("error"):
                log.warning(
                    "signal-cli-rest-api reported on the receive socket: %s", payload["error"]
                )
            return None
        account = payload.get("account")
        envelope = payload.get("envelope")
        if (account and account != self._account) or not isinstance(envelope, Mapping):
            return None
        number = envelope.get("sourceNumber")
        uuid = envelope.get("sourceUuid")
        source = envelope.get("source")
        if self._is_self(number or source, uuid):
            if uuid and self._self_uuid is None:
                self._self_uuid = str(uuid)
            return None
        data = envelope.get("dataMessage")
        if not isinstance(data, Mapping):  # sync, receipt, typing, edit, call, story
            return None
        if data.get("reaction") or data.get("remoteDelete"):
            return None
        text = data.get("message") or ""
        attachments = [a for a in data.get("attachments") or [] if isinstance(a, Mapping)]
        if not isinstance(text, str) or (not text and not attachments):
            return None
        sender = str(number or uuid or source or "")
        if not sender:
            return None
        timestamp = data.get("timestamp") or envelope.get("timestamp")
        if not isinstance(timestamp, int):
            return None

        group = data.get("groupInfo")
        if isinstance(group, Mapping) and group.get("groupId"):
            kind: ChatKind = "group"
            chat_id = await self._group_chat_id(str(group["groupId"]))
        else:
            kind, chat_id = "dm", sender

        mentions = [m for m in data.get("mentions") or [] if isinstance(m, Mapping)]
        text, mentioned = strip_bot_mentions(text, mentions, self._is_bot_mention)
        if self._quotes_bot(data.get("quote")):
            mentioned = True
        text = normalise_command(text)

        images, files, notes = await self._download_attachments(attachments)
        if notes:
            text = "\n".join([text, *notes]) if text else "\n".join(notes)

        message_id = format_message_id(sender, timestamp)
        return Inbound(
            chat=ChatRef(self._channel, self._account, kind, chat_id, None, message_id),
            sender_id=sender,
            text=text,
            message_id=message_id,
            sender_name=str(envelope.get("sourceName") or ""),
            mentioned=mentioned,
            images=tuple(images),
            attachments=tuple(files),
        )

    def _is_bot_mention(self, mention: Mapping[str, Any]) -> bool:
        return self._is_self(mention.get("number") or mention.get("name"), mention.get("uuid"))

    def _quotes_bot(self, quote: Any) -> bool:
        if not isinstance(quote, Mapping):
            return False
        if self._is_self(quote.get("authorNumber") or quote.get("author"), quote.get("authorUuid")):
            return True
        return quote.get("id") in self._sent

    async def _download_attachments(
        self, attachments: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Image], list[Attachment], list[str]]:
        images: list[Image] = []
        files: list[Attachment] = []
        notes: list[str] = []
        limit = self._max_image_bytes
        for attachment in attachments:
            media_type = str(attachment.get("contentType") or "").lower()
            name = str(attachment.get("filename") or attachment.get("id") or "file")
            if not media_type.startswith("image/"):
                files.append(await self._attachment(attachment, name, media_type))
                continue
            if media_type not in SUPPORTED_IMAGE_TYPES:
                notes.append(f"[image in unsupported format {media_type}: {name}]")
                continue
            size = attachment.get("size")
            if isinstance(size, int) and size > limit:
                notes.append(image_too_large(limit, size))
                continue
            attachment_id = attachment.get("id")
            if not attachment_id:
                notes.append(f"[image could not be downloaded: {name}]")
                continue
            try:
                data = await self._api.download(str(attachment_id), limit)
            except SignalApiError as exc:
                log.warning("downloading a Signal image failed: %s", exc)
                notes.append(f"[image could not be downloaded: {name}]")
                continue
            if data is None:
                notes.append(image_too_large(limit))
                continue
            images.append(Image(media_type, data))
        return images, files, notes

    async def _attachment(
        self, attachment: Mapping[str, Any], name: str, media_type: str
    ) -> Attachment:
        """A voice note, audio file or document, downloaded within `max_file_bytes`."""
        size = attachment.get("size") if isinstance(attachment.get("size"), int) else None
        attachment_id = attachment.get("id")
        data = None
        if attachment_id and (size is None or size <= self._max_file_bytes):
            try:
                data = await self._api.download(str(attachment_id), self._max_file_bytes)
            except SignalApiError as exc:
                log.warning("downloading a Signal attachment failed: %s", exc)
        kind: Literal["audio", "file"] = "audio" if media_type.startswith("audio/") else "file"
        if kind == "audio" and "." not in name:
            name = "voice." + (media_type.split("/", 1)[1].split(";")[0] or "aac")
        return Attachment(kind, name, media_type or "application/octet-stream", data, size)

    async def maybe_send_read_receipt(self, inbound: Inbound) -> None:
        """Mark `inbound` read, when the options ask for read receipts (failures are logged)."""
        if not self._send_read_receipts:
            return
        parsed = parse_message_id(inbound.message_id)
        if parsed is None:
            return
        try:
            await self._api.request(
                "POST",
                f"/v1/receipts/{self._account}",
                {"receipt_type": "read", "recipient": parsed[0], "timestamp": parsed[1]},
                seconds=SMALL_REQUEST_TIMEOUT,
            )
        except SignalApiError as exc:
            log.debug("read receipt failed: %s", exc)
