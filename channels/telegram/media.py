"""Telegram media: voice notes, audio and documents received; files sent; reactions.

`TelegramMedia` reads a message's voice note, audio file or (non-image) document into an
`Attachment`, downloading through `getFile` within `max_file_bytes` (the Bot API serves at
most 20 MB); sends a file with `sendPhoto` (images up to 10 MB) or `sendDocument` (up to
50 MB), in the chat's forum topic if any; a spoken reply with `sendVoice` (OGG/Opus); and sets or clears the bot's reaction with
`setMessageReaction`. A refusal by Telegram becomes `Refused` with Telegram's own words.
"""

from __future__ import annotations

import logging

from telegram import InputFile, Message, ReactionTypeEmoji
from telegram.error import TelegramError

from channels.base import Attachment, ChatRef, OutboundFile, OutboundVoice, Refused
from channels.telegram.delivery import TelegramSender
from channels.telegram.options import TelegramOptions
from channels.telegram.redaction import LOGGER_NAME, SecretRedactor

log = logging.getLogger(LOGGER_NAME)

MAX_PHOTO_BYTES = 10_000_000


class TelegramMedia:
    """Attachments in, files and reactions out, for one bot."""

    def __init__(
        self, options: TelegramOptions, sender: TelegramSender, redactor: SecretRedactor
    ) -> None:
        self._opt = options
        self._sender = sender
        self._redactor = redactor

    @staticmethod
    def has_attachment(message: Message) -> bool:
        document = message.document
        is_image = document is not None and (document.mime_type or "").startswith("image/")
        return bool(message.voice or message.audio or (document is not None and not is_image))

    async def attachments(self, message: Message) -> list[Attachment]:
        """The voice note, audio file or document of a message (none for other messages)."""
        if message.voice is not None:
            voice = message.voice
            kind, file_id, size = "audio", voice.file_id, voice.file_size
            name, media_type = "voice.ogg", voice.mime_type or "audio/ogg"
            duration: float | None = _seconds(voice.duration)
        elif message.audio is not None:
            audio = message.audio
            kind, file_id, size = "audio", audio.file_id, audio.file_size
            name, media_type = audio.file_name or "audio", audio.mime_type or "audio/mpeg"
            duration = _seconds(audio.duration)
        elif message.document is not None and self.has_attachment(message):
            document = message.document
            kind, file_id, size = "file", document.file_id, document.file_size
            name = document.file_name or "file"
            media_type = document.mime_type or "application/octet-stream"
            duration = None
        else:
            return []
        data = None
        if size is None or size <= self._opt.max_file_bytes:
            data = await self._download(message, file_id)
        if data is not None and len(data) > self._opt.max_file_bytes:
            size, data = len(data), None
        return [
            Attachment(
                "audio" if kind == "audio" else "file", name, media_type, data, size, duration
            )
        ]

    async def _download(self, message: Message, file_id: str) -> bytes | None:
        bot = self._sender.bot_app().bot
        try:
            file = await self._sender.call(
                "getFile", message.chat.id, lambda: bot.get_file(file_id)
            )
            return bytes(await file.download_as_bytearray())
        except Exception as exc:
            log.warning(
                "telegram: could not download a file in chat %s: %s",
                message.chat.id,
                self._redactor.redact(str(exc)),
            )
            return None

    async def send_file(self, out: OutboundFile) -> None:
        """`sendPhoto` or `sendDocument`; raises `Refused` when Telegram says no."""
        bot = self._sender.bot_app().bot
        chat = out.chat
        thread = int(chat.thread_id) if chat.thread_id else None
        upload = InputFile(out.data, filename=out.name)
        caption = out.caption or None
        try:
            if out.as_photo and len(out.data) <= MAX_PHOTO_BYTES:
                await self._sender.call(
                    "sendPhoto",
                    chat.chat_id,
                    lambda: bot.send_photo(
                        chat.chat_id, upload, caption=caption, message_thread_id=thread
                    ),
                    retry=False,
                )
            else:
                await self._sender.call(
                    "sendDocument",
                    chat.chat_id,
                    lambda: bot.send_document(
                        chat.chat_id, upload, caption=caption, message_thread_id=thread
                    ),
                    retry=False,
                )
        except TelegramError as exc:
            raise Refused(f"Telegram: {self._redactor.redact(exc.message)}") from None

    async def send_voice(self, out: OutboundVoice) -> None:
        """`sendVoice` (OGG/Opus, shown as a voice note); raises `Refused` when Telegram says no."""
        bot = self._sender.bot_app().bot
        chat = out.chat
        thread = int(chat.thread_id) if chat.thread_id else None
        upload = InputFile(out.data, filename="reply.ogg")
        try:
            await self._sender.call(
                "sendVoice",
                chat.chat_id,
                lambda: bot.send_voice(
                    chat.chat_id,
                    upload,
                    duration=max(1, round(out.duration_s)),
                    caption=out.caption or None,
                    message_thread_id=thread,
                ),
                retry=False,
            )
        except TelegramError as exc:
            raise Refused(f"Telegram: {self._redactor.redact(exc.message)}") from None

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        """Set the bot's reaction (Telegram keeps one per bot), or clear it."""
        bot = self._sender.bot_app().bot
        reaction = [] if remove else [ReactionTypeEmoji(emoji)]
        try:
            await self._sender.call(
                "setMessageReaction",
                chat.chat_id,
                lambda: bot.set_message_reaction(chat.chat_id, int(message_id), reaction),
                retry=False,
            )
        except TelegramError as exc:
            raise Refused(f"Telegram: {self._redactor.redact(exc.message)}") from None


def _seconds(value: object) -> float | None:
    """A duration as PTB gives it (int seconds, or a timedelta with PTB_TIMEDELTA)."""
    total = getattr(value, "total_seconds", None)
    if callable(total):
        return float(total())
    return float(value) if isinstance(value, int | float) else None
