"""Reading what Telegram sends: which messages are for us, and each one as an `Inbound`.

Owns `TelegramReader`: the filter (chat kinds, our own messages, commands for other bots),
and normalising a message (mentions stripped, a reply to the bot counts as a mention, forum
topics as threads, images downloaded through the sender within `max_image_bytes`, voice notes
and documents through `media`). The
adapter hands it the bot's current username; everything else comes in at construction.
"""

from __future__ import annotations

import logging

from telegram import Message

from channels.base import ChatRef, Image, Inbound, image_too_large
from channels.telegram.delivery import TelegramSender
from channels.telegram.media import TelegramMedia
from channels.telegram.options import TelegramOptions
from channels.telegram.redaction import LOGGER_NAME, SecretRedactor
from channels.telegram.text import (
    IMAGE_TYPES,
    command_target,
    sniff_image_type,
    strip_bot_mentions,
)

log = logging.getLogger(LOGGER_NAME)


class TelegramReader:
    """Filters and normalises incoming messages for one bot (see the module docstring)."""

    def __init__(
        self, options: TelegramOptions, sender: TelegramSender, redactor: SecretRedactor
    ) -> None:
        self._opt = options
        self._sender = sender
        self._redactor = redactor
        self._media = TelegramMedia(options, sender, redactor)

    def wanted(self, message: Message, username: str) -> bool:
        """Whether a message is for us: a chat kind we serve, not our own, not a command
        for another bot, and with text, a caption or an image."""
        if message.chat.type not in ("private", "group", "supergroup"):
            return False
        sender = message.from_user
        if sender is not None and sender.id == self._opt.bot_id:
            return False
        if message.chat.type != "private":
            target = command_target(message.text or message.caption or "")
            if target and target.lower() != username.lower():
                return False  # a command for another bot in the same group
        return bool(
            message.text
            or message.caption
            or message.photo
            or self._image_document(message)
            or TelegramMedia.has_attachment(message)
        )

    async def normalise(self, message: Message, username: str) -> Inbound:
        """The message as an `Inbound`: mentions stripped, images downloaded and capped."""
        is_dm = message.chat.type == "private"
        text = message.text or message.caption or ""
        entities = message.entities or message.caption_entities or ()
        text, mentioned = strip_bot_mentions(text, entities, username, self._opt.bot_id)
        reply = message.reply_to_message
        if (
            reply is not None
            and reply.forum_topic_created is None  # topic messages "reply" to the topic's root
            and reply.from_user is not None
            and reply.from_user.id == self._opt.bot_id
        ):
            mentioned = True
        thread = message.message_thread_id if message.is_topic_message else None
        images, notes = await self._collect_images(message)
        if notes:
            text = "\n".join([text, *notes]).strip()
        sender = message.from_user
        chat = ChatRef(
            channel="telegram",
            account=str(self._opt.bot_id),
            kind="dm" if is_dm else "group",
            chat_id=str(message.chat.id),
            thread_id=str(thread) if thread is not None else None,
            reply_to=str(message.message_id),
        )
        return Inbound(
            chat=chat,
            sender_id=str(sender.id) if sender else str(message.chat.id),
            text=text,
            message_id=str(message.message_id),
            sender_name=(sender.full_name or sender.username or "") if sender else "",
            mentioned=mentioned,
            images=tuple(images),
            attachments=tuple(await self._media.attachments(message)),
        )

    @staticmethod
    def _image_document(message: Message) -> bool:
        document = message.document
        return document is not None and (document.mime_type or "").startswith("image/")

    async def _collect_images(self, message: Message) -> tuple[list[Image], list[str]]:
        cap = self._opt.max_image_bytes
        if message.photo:
            fitting = [p for p in message.photo if p.file_size is None or p.file_size <= cap]
            if not fitting:
                smallest = min(p.file_size or 0 for p in message.photo)
                return [], [image_too_large(cap, smallest)]
            best = max(fitting, key=lambda p: (p.width * p.height, p.file_size or 0))
            file_id, declared = best.file_id, "image/jpeg"
        elif self._image_document(message):
            document = message.document
            assert document is not None
            if document.file_size is not None and document.file_size > cap:
                return [], [image_too_large(cap, document.file_size)]
            file_id, declared = document.file_id, document.mime_type or ""
        else:
            return [], []
        bot = self._sender.bot_app().bot
        try:
            file = await self._sender.call(
                "getFile", message.chat.id, lambda: bot.get_file(file_id)
            )
            data = bytes(await file.download_as_bytearray())
        except Exception as exc:
            log.warning(
                "telegram: could not download an image in chat %s: %s",
                message.chat.id,
                self._redactor.redact(str(exc)),
            )
            return [], ["[image could not be downloaded]"]
        if len(data) > cap:
            return [], [image_too_large(cap, len(data))]
        media_type = sniff_image_type(data) or declared
        if media_type not in IMAGE_TYPES:
            return [], [f"[image format not supported: {media_type or 'unknown'}]"]
        return [Image(media_type, data)], []
