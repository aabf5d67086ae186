"""Delivery to WhatsApp through `POST /{phone-number-id}/messages`: Markdown cut into chunks
of at most 4,096 characters and rendered in WhatsApp's own formatting, one message per
chunk (the API cannot edit, so there is no preview), files uploaded then sent by media id,
reactions, and read receipts with the typing indicator.

Messages refused for the 24-hour window (131047) are not lost: the unsent rest goes to
`HeldMessages` (or, when `window_template` is set, an approved template carries it), and is
sent when the person writes again. Replies go out one chat at a time in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from channels.base import Outbound, OutboundFile, Refused
from channels.chunking import split_markdown
from channels.ordering import ChatLocks
from channels.whatsapp.api import REENGAGEMENT, GraphApi, GraphError
from channels.whatsapp.inbound import RecentTexts
from channels.whatsapp.options import WhatsAppOptions
from channels.whatsapp.render import render_whatsapp
from channels.whatsapp.window import HeldMessages, ServiceWindow

log = logging.getLogger("channels.whatsapp")

MAX_TEXT = 4096  # the Cloud API's limit for a text body
_TEMPLATE_PARAMETER = 1000
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png"})
_AUDIO_TYPES = frozenset({"audio/ogg", "audio/mpeg", "audio/mp4", "audio/aac", "audio/amr"})


def rendered_chunks(markdown: str, limit: int) -> list[tuple[str, str]]:
    """(Markdown, WhatsApp text) pairs, each text within `MAX_TEXT` characters."""
    pairs: list[tuple[str, str]] = []
    for chunk in split_markdown(markdown, limit):
        text = render_whatsapp(chunk)
        while len(text) > MAX_TEXT:  # links shown with their URL can outgrow the chunk
            pairs.append((chunk, text[:MAX_TEXT]))
            text = text[MAX_TEXT:]
        if text.strip():
            pairs.append((chunk, text))
    return pairs


class WhatsAppSender:
    """Sends as the business number; `sent` remembers the Markdown of recent messages by id
    (a later `failed` status can hold it, and a reply to it can quote it)."""

    def __init__(
        self,
        api: GraphApi,
        options: WhatsAppOptions,
        window: ServiceWindow,
        held: HeldMessages,
        on_change: Callable[[], None],
    ) -> None:
        self._api = api
        self._opt = options
        self._window = window
        self.held = held
        self.sent = RecentTexts()
        self._recipients = RecentTexts()  # message id -> its recipient
        self._locks = ChatLocks()
        self._on_change = on_change

    async def send(self, out: Outbound) -> None:
        to = out.chat.chat_id
        async with self._locks.hold(to):
            await self._send_text(to, out.text)

    async def _send_text(self, to: str, markdown: str) -> None:
        pairs = rendered_chunks(markdown, self._opt.chunk_limit)
        if self._window.closed(to):
            await self._outside_window(to, [md for md, _ in pairs])
            return
        for index, (_, text) in enumerate(pairs):
            try:
                message_id = await self._api.messages(
                    {"to": to, "type": "text", "text": {"body": text, "preview_url": False}}
                )
            except GraphError as exc:
                if exc.code == REENGAGEMENT:
                    await self._outside_window(to, [md for md, _ in pairs[index:]])
                    return
                raise
            self.sent.remember(message_id, pairs[index][0])
            self._recipients.remember(message_id, to)

    async def _outside_window(self, to: str, chunks: list[str]) -> None:
        """Hold what could not go (or send it as the configured template)."""
        text = "\n".join(chunks)
        if not text.strip():
            return
        template = self._opt.window_template
        if template is not None:
            try:
                await self._api.messages(
                    _template_message(to, template.name, template.language, text)
                )
                log.info("WhatsApp: %s is outside the 24-hour window; sent as a template", to)
                return
            except GraphError as exc:
                log.warning("WhatsApp: the window template was refused: %s", exc)
        self.held.hold(to, text)
        self._on_change()

    def failed(self, message_id: str, code: int) -> bool:
        """A `failed` status for one of ours: hold it when the window was the reason. True
        when it was held."""
        if code != REENGAGEMENT:
            return False
        text = self.sent.get(message_id)
        to = self._recipients.get(message_id)
        if text is None or to is None:
            return False
        self.held.hold(to, text)
        self._on_change()
        return True

    async def release(self, to: str) -> None:
        """The person wrote: send what was held for them, oldest first."""
        waiting = self.held.take(to)
        if not waiting:
            return
        self._on_change()
        async with self._locks.hold(to):
            for number, item in enumerate(waiting):
                try:
                    await self._send_text(to, item.text)
                except GraphError as exc:
                    log.warning("WhatsApp: a held message to %s failed again: %s", to, exc)
                    self.held.put_back(waiting[number:])
                    self._on_change()
                    return
        log.info("WhatsApp: %d held message(s) sent to %s", len(waiting), to)

    async def send_file(self, out: OutboundFile) -> None:
        to = out.chat.chat_id
        media_type = out.media_type.split(";")[0].strip()
        try:
            media_id = await self._api.upload(out.name, media_type, out.data)
        except GraphError as exc:
            raise Refused(f"WhatsApp refused the upload: {exc}") from None
        if out.as_photo and media_type in _IMAGE_TYPES:
            body = {"type": "image", "image": {"id": media_id, "caption": out.caption}}
        elif media_type in _AUDIO_TYPES:
            body = {"type": "audio", "audio": {"id": media_id}}
        else:
            document = {"id": media_id, "filename": out.name, "caption": out.caption}
            body = {"type": "document", "document": document}
        async with self._locks.hold(to):
            try:
                await self._api.messages({"to": to, **body})
            except GraphError as exc:
                raise Refused(f"WhatsApp refused the file: {exc}") from None
            if body["type"] == "audio" and out.caption.strip():
                await self._send_text(to, out.caption)  # audio messages carry no caption

    async def send_voice(self, to: str, data: bytes) -> None:
        """A voice note: OGG/Opus uploaded, then sent as audio (WhatsApp plays it in place)."""
        try:
            media_id = await self._api.upload("voice.ogg", "audio/ogg", data)
            async with self._locks.hold(to):
                await self._api.messages({"to": to, "type": "audio", "audio": {"id": media_id}})
        except GraphError as exc:
            raise Refused(f"WhatsApp refused the voice note: {exc}") from None

    async def react(self, to: str, message_id: str, emoji: str) -> None:
        """React to `message_id` ("" takes the bot's reaction back)."""
        try:
            await self._api.messages(
                {
                    "to": to,
                    "type": "reaction",
                    "reaction": {"message_id": message_id, "emoji": emoji},
                }
            )
        except GraphError as exc:
            raise Refused(f"WhatsApp: {exc}") from None

    async def read_and_type(self, message_id: str) -> None:
        """Mark `message_id` read and show "typing…" (for up to 25 s or until the reply)."""
        await self._api.messages(
            {"status": "read", "message_id": message_id, "typing_indicator": {"type": "text"}}
        )


def _template_message(to: str, name: str, language: str, text: str) -> dict[str, object]:
    """A template message whose body's `{{1}}` is the start of `text` (WhatsApp refuses
    new lines, tabs and runs of spaces in a parameter)."""
    flat = " ".join(text.split())
    if len(flat) > _TEMPLATE_PARAMETER:
        flat = flat[: _TEMPLATE_PARAMETER - 1] + "…"
    return {
        "to": to,
        "type": "template",
        "template": {
            "name": name,
            "language": {"code": language},
            "components": [{"type": "body", "parameters": [{"type": "text", "text": flat}]}],
        },
    }
