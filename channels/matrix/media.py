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

from channels.base import (
    Attachment,
    ChatRef,
    Image,
    OutboundFile,
    OutboundVoice,
    Refused,
    image_too_large,
)
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
        image = out.as_photo and out.media_type.startswith("image/")
        await self._send_media(
            out.chat, out.data, out.media_type, out.name, out.caption or out.name,
            {"msgtype": "m.image" if image else "m.file"},
        )  # fmt: skip

    async def send_voice(self, out: OutboundVoice) -> None:
        """A voice message (`m.audio` marked as voice, with its duration and waveform, as
        Element sends them); the caption is its body."""
        duration_ms = int(out.duration_s * 1000)
        levels = [round(level * 1024 / 255) for level in out.waveform]
        extra: dict[str, Any] = {
            "msgtype": "m.audio",
            "org.matrix.msc1767.audio": {"duration": duration_ms, "waveform": levels},
            "org.matrix.msc3245.voice": {},
        }
        body = out.caption or "Voice message"
        await self._send_media(
            out.chat, out.data, "audio/ogg", "voice.ogg", body, extra, duration_ms
        )

    async def _send_media(
        self,
        chat: ChatRef,
        data: bytes,
        media_type: str,
        name: str,
        body: str,
        extra: dict[str, Any],
        duration_ms: int | None = None,
    ) -> None:
        """Upload `data` (encrypted in an encrypted room) and post it as `extra`'s msgtype."""
        client = self._delivery.running()
        room_id = await self._delivery.room_for(chat)
        room = client.rooms.get(room_id)
        encrypted = bool(room is not None and room.encrypted)
        uploaded, keys = await client.upload(
            io.BytesIO(data),
            content_type=media_type,
            filename=name,
            encrypt=encrypted,
            filesize=len(data),
        )
        if not isinstance(uploaded, nio.UploadResponse):
            raise Refused(f"the homeserver refused the upload: {uploaded}")
        info: dict[str, Any] = {"mimetype": media_type, "size": len(data)}
        if duration_ms is not None:
            info["duration"] = duration_ms
        content: dict[str, Any] = {**extra, "body": body, "filename": name, "info": info}
        if encrypted and keys is not None:
            content["file"] = {**keys, "url": uploaded.content_uri}
        else:
            content["url"] = uploaded.content_uri
        if chat.thread_id is not None:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": chat.thread_id,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": chat.reply_to or chat.thread_id},
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
