"""Matrix media and reactions: attachments in (downloaded, decrypted, size-capped), files out
(uploaded to the media repository as `mxc://`, encrypted first in an encrypted room), and
reactions (`m.reaction`, taken back by redacting the bot's own).

Decisions:
- An image of a kind the model reads (JPEG, PNG, GIF, WebP) within `max_image_bytes` goes to
  the model; a larger one becomes a note. Audio (`m.audio`, voice messages included: they
  carry `org.matrix.msc3245.voice`) is an `audio` attachment for transcription; video and
  any other file a `file` attachment for the workspace inbox, within `max_file_bytes`.
- A caption is the body when the event names the file apart (`filename`), as the spec says.
"""

from __future__ import annotations

import io
import logging
from typing import Any, Literal

import nio
from nio.crypto.attachments import decrypt_attachment

from channels.base import Attachment, ChatRef, Image, OutboundFile, Refused, image_too_large
from channels.matrix.delivery import MatrixDelivery, MatrixDeliveryError
from channels.matrix.options import MatrixOptions

log = logging.getLogger("channels.matrix")

MODEL_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MEDIA = (nio.RoomMessageMedia, nio.RoomEncryptedMedia)


class MatrixMedia:
    """Media of one account, through the delivery's client."""

    def __init__(self, options: MatrixOptions, delivery: MatrixDelivery) -> None:
        self._options = options
        self._delivery = delivery
        self._reactions: dict[tuple[str, str], str] = {}  # (message, emoji) -> reaction event

    # -- in --------------------------------------------------------------------------------

    async def read(self, event: nio.RoomMessage) -> tuple[str, list[Image], list[Attachment]]:
        """A media event's caption, and what it carries for the model or the inbox."""
        content: dict[str, Any] = event.source.get("content", {})
        found = content.get("info")
        info: dict[str, Any] = found if isinstance(found, dict) else {}
        body = str(content.get("body") or "")
        name = str(content.get("filename") or body or "file")
        caption = body if content.get("filename") and body != content.get("filename") else ""
        media_type = str(info.get("mimetype") or "application/octet-stream")
        size = info.get("size") if isinstance(info.get("size"), int) else None
        image = isinstance(event, nio.RoomMessageImage | nio.RoomEncryptedImage)
        if image and media_type in MODEL_IMAGES:
            limit = self._options.max_image_bytes
            data = await self._download(event, size, limit)
            if data is None:
                return _joined(caption, image_too_large(limit, size)), [], []
            return caption, [Image(media_type, data)], []
        audio = isinstance(event, nio.RoomMessageAudio | nio.RoomEncryptedAudio)
        kind: Literal["audio", "file"] = "audio" if audio else "file"
        duration = info.get("duration")
        data = await self._download(event, size, self._options.max_file_bytes)
        attachment = Attachment(
            kind,
            name,
            media_type,
            data,
            size if size is not None else (len(data) if data is not None else None),
            duration / 1000 if isinstance(duration, int | float) else None,
        )
        return caption, [], [attachment]

    async def _download(self, event: nio.RoomMessage, size: int | None, limit: int) -> bytes | None:
        """The file's bytes (decrypted), or None if over `limit` or the download failed."""
        if size is not None and size > limit:
            return None
        url = getattr(event, "url", "")
        try:
            got = await self._delivery.running().download(url)
        except (nio.LocalProtocolError, MatrixDeliveryError) as exc:
            log.warning("matrix: could not download %s: %s", url, exc)
            return None
        if not isinstance(got, nio.MemoryDownloadResponse):
            log.warning("matrix: could not download %s: %s", url, got)
            return None
        data = got.body
        if isinstance(event, nio.RoomEncryptedMedia):
            try:
                data = decrypt_attachment(data, event.key["k"], event.hashes["sha256"], event.iv)
            except (KeyError, ValueError, nio.EncryptionError) as exc:
                log.warning("matrix: could not decrypt %s: %s", url, exc)
                return None
        return data if len(data) <= limit else None

    # -- out -------------------------------------------------------------------------------

    async def send_file(self, out: OutboundFile) -> None:
        client = self._delivery.running()
        room_id = await self._delivery.room_for(out.chat)
        room = client.rooms.get(room_id)
        encrypted = bool(room is not None and room.encrypted)
        uploaded, keys = await client.upload(
            io.BytesIO(out.data),
            content_type=out.media_type,
            filename=out.name,
            encrypt=encrypted,
            filesize=len(out.data),
        )
        if not isinstance(uploaded, nio.UploadResponse):
            raise Refused(f"the homeserver refused the upload: {uploaded}")
        image = out.as_photo and out.media_type.startswith("image/")
        content: dict[str, Any] = {
            "msgtype": "m.image" if image else "m.file",
            "body": out.caption or out.name,
            "filename": out.name,
            "info": {"mimetype": out.media_type, "size": len(out.data)},
        }
        if encrypted and keys is not None:
            content["file"] = {**keys, "url": uploaded.content_uri}
        else:
            content["url"] = uploaded.content_uri
        if out.chat.thread_id is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": out.chat.thread_id,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": out.chat.reply_to or out.chat.thread_id},
            }
        try:
            await self._delivery.room_send(room_id, "m.room.message", content)
        except MatrixDeliveryError as exc:
            raise Refused(str(exc)) from None

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        room_id = await self._delivery.room_for(chat)
        key = (message_id, emoji)
        try:
            if remove:
                reaction = self._reactions.pop(key, None)
                if reaction is not None:
                    await self._delivery.delete(chat, reaction)
                return
            content = {
                "m.relates_to": {"rel_type": "m.annotation", "event_id": message_id, "key": emoji}
            }
            self._reactions[key] = await self._delivery.room_send(room_id, "m.reaction", content)
        except MatrixDeliveryError as exc:
            raise Refused(str(exc)) from None


def _joined(*parts: str) -> str:
    return "\n".join(part for part in parts if part)
