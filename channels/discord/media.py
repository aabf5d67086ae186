"""Discord media: attachments received, files sent, reactions.

`DiscordMedia.read` turns a message's attachments into what the model gets: images (JPEG,
PNG, GIF, WebP within `max_image_bytes`) as `Image`s, voice messages and audio files as
audio `Attachment`s (transcribed by the daemon like other voice notes), any other file as a
file `Attachment` for the workspace inbox, each downloaded within its cap from the URL the
message names (no token is sent with it). `send_file` uploads one file to the chat (with
the caption as the message text); `send_voice` posts a voice message (the voice flag, one
OGG/Opus attachment with its duration and waveform, no text: Discord allows none); `react` adds or removes the bot's reaction: a Unicode
emoji, or a custom one as `name:id`. Refusals become `Refused` with Discord's own words.
"""

from __future__ import annotations

import base64
import io
import logging
import mimetypes

import aiohttp
import discord
from discord.http import handle_message_parameters

from channels.base import (
    Attachment,
    ChatRef,
    Image,
    OutboundFile,
    OutboundVoice,
    Refused,
    image_too_large,
)
from channels.discord.delivery import DiscordDelivery, DiscordDeliveryError
from channels.discord.options import DiscordOptions

log = logging.getLogger("channels.discord")

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # what a bot may upload to any server


class DiscordMedia:
    """Attachments in, files and reactions out (see the module docstring)."""

    def __init__(self, options: DiscordOptions, delivery: DiscordDelivery) -> None:
        self._options = options
        self._delivery = delivery

    async def read(
        self, attachments: list[discord.Attachment]
    ) -> tuple[list[Image], list[Attachment], list[str]]:
        """Images, other attachments, and notes for the text (an image that was too large)."""
        images: list[Image] = []
        files: list[Attachment] = []
        notes: list[str] = []
        for item in attachments:
            media_type = _media_type(item)
            if media_type.startswith("image/"):
                image, note = await self._image(item, media_type)
                if image is not None:
                    images.append(image)
                else:
                    notes.append(note)
                continue
            audio = media_type.startswith("audio/") or item.is_voice_message()
            cap = self._options.max_file_bytes
            data = await self._download(item) if item.size <= cap else None
            name = "voice-message.ogg" if item.is_voice_message() else item.filename
            files.append(
                Attachment(
                    "audio" if audio else "file",
                    name,
                    media_type,
                    data,
                    item.size,
                    item.duration if audio else None,
                )
            )
        return images, files, notes

    async def _image(self, item: discord.Attachment, media_type: str) -> tuple[Image | None, str]:
        cap = self._options.max_image_bytes
        if media_type not in IMAGE_TYPES:
            return None, f"[image format not supported: {media_type}]"
        if item.size > cap:
            return None, image_too_large(cap, item.size)
        data = await self._download(item)
        if data is None:
            return None, "[image could not be downloaded]"
        if len(data) > cap:
            return None, image_too_large(cap, len(data))
        return Image(media_type, data), ""

    async def _download(self, item: discord.Attachment) -> bytes | None:
        try:
            return await item.read()
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.warning(
                "discord: could not download attachment %s: %s", item.id, type(exc).__name__
            )
            return None

    async def send_file(self, out: OutboundFile) -> None:
        """Upload a file to the chat; `Refused` when Discord says no."""
        if len(out.data) > MAX_UPLOAD_BYTES:
            raise Refused(f"Discord: the file is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB")
        delivery = self._delivery
        try:
            channel = await delivery.target(out.chat)

            async def upload() -> discord.Message:
                upload = discord.File(io.BytesIO(out.data), filename=out.name)
                return await channel.send(
                    out.caption or None,
                    file=upload,
                    allowed_mentions=discord.AllowedMentions.none(),
                )

            async with delivery.chat_lock(out.chat):
                await delivery.call("send a file to", out.chat, upload)
        except DiscordDeliveryError as exc:
            raise Refused(f"Discord: {_refusal(exc)}") from None

    async def send_voice(self, out: OutboundVoice) -> None:
        """A voice message (played in place, with its waveform); `Refused` when Discord says
        no (a channel where voice messages are not allowed, for one)."""
        if len(out.data) > MAX_UPLOAD_BYTES:
            raise Refused(
                f"Discord: the voice note is over {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB"
            )
        delivery = self._delivery
        try:
            client = delivery.client()
            channel = await delivery.target(out.chat)

            async def post() -> object:
                note = VoiceFile(out.data, out.duration_s, out.waveform)
                flags = discord.MessageFlags(voice=True)
                with handle_message_parameters(file=note, flags=flags) as params:
                    return await client.http.send_message(channel.id, params=params)

            async with delivery.chat_lock(out.chat):
                await delivery.call("send a voice message to", out.chat, post)
        except DiscordDeliveryError as exc:
            raise Refused(f"Discord: {_refusal(exc)}") from None

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        """Add the bot's reaction to a message, or take it back off (a slash command's use
        is no message: nothing to react to)."""
        if message_id.startswith("interaction:"):
            return
        delivery = self._delivery
        try:
            client = delivery.client()
            channel_id = delivery.message_channel(chat, message_id)
            if not channel_id:
                channel_id = (await delivery.target(chat)).id
            message = client.get_partial_messageable(channel_id).get_partial_message(
                int(message_id)
            )
            if remove:
                me = discord.Object(client.user.id if client.user else 0)
                await delivery.call(
                    "remove a reaction in", chat, lambda: message.remove_reaction(emoji, me)
                )
            else:
                await delivery.call("react in", chat, lambda: message.add_reaction(emoji))
        except DiscordDeliveryError as exc:
            raise Refused(f"Discord: {_refusal(exc)}") from None
        except ValueError:
            raise Refused(f"Discord: {message_id!r} is not a Discord message id") from None


def _media_type(item: discord.Attachment) -> str:
    declared = (item.content_type or "").split(";", 1)[0].strip().lower()
    if declared:
        return declared
    guessed, _ = mimetypes.guess_type(item.filename)
    return guessed or "application/octet-stream"


def _refusal(exc: DiscordDeliveryError) -> str:
    cause = exc.__cause__
    if isinstance(cause, discord.HTTPException):
        return cause.text or f"HTTP {cause.status}"
    return str(exc)


class VoiceFile(discord.File):
    """The one attachment of a voice message: OGG/Opus with `duration_secs` and `waveform`
    (base64 of up to 256 levels), which discord.py's `File` does not carry."""

    def __init__(self, data: bytes, duration_s: float, waveform: bytes) -> None:
        super().__init__(io.BytesIO(data), filename="voice-message.ogg")
        self.voice_fields = {
            "duration_secs": round(duration_s, 2),
            "waveform": base64.b64encode(waveform or bytes(1)).decode("ascii"),
        }

    def to_dict(self, index: int) -> dict[str, object]:
        return {**super().to_dict(index), **self.voice_fields}
