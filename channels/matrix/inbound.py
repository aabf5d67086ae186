"""Matrix room messages to `Inbound`: filtered, read (mentions, replies, threads, media) and
handed on in the order the homeserver's `/sync` gives them.

Decisions:
- Ignored: the bot's own messages, notices (`m.notice`: what bots send, so two bots never
  loop), edits (`m.replace`), redactions and reactions (not messages), a message seen
  before, everything in the first `/sync` of a fresh account (history from before Perch ran),
  and a message from a device `device_trust` does not trust (`trust.py`).
- A message nio could not decrypt (no room key yet) is logged with the room and sender, and
  the key is asked for from the sender's devices; it is not answered.
- `ChatRef`: a DM (a room invited to as `is_direct`, or any two-member room) has the sender's
  user id as `chat_id` (its room remembered for the answer); a room's `chat_id` is the room
  id, with the thread root's event id as `thread_id` in a thread (one session per thread).
  With `auto_thread`, a room message that addresses the bot gets its own event id as
  `thread_id`: the answer starts a thread under it. `reply_to` is always the event id.
- Mentioned: `m.mentions`, a pill or the bot's name (`text.py`), a reply to one of the bot's
  messages, or any message in a thread the bot answered in.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import nio

from channels.base import ChatRef, Inbound, InboundHandler
from channels.matrix.delivery import MatrixDelivery
from channels.matrix.media import MEDIA, MatrixMedia
from channels.matrix.options import MatrixOptions
from channels.matrix.text import fallback_sender, mentions_bot, strip_mention, strip_reply_fallback

log = logging.getLogger("channels.matrix")

_SEEN_LIMIT = 4096
_TEXT_TYPES = (nio.RoomMessageText, nio.RoomMessageEmote)


class MatrixInbound:
    """The receiving side of one account: `on_message` and `on_undecryptable` are nio's
    event callbacks; `is_direct(room_id)` says which rooms were invited to as DMs, and
    `admits(event)` whether an encrypted message's device is trusted."""

    def __init__(
        self,
        options: MatrixOptions,
        delivery: MatrixDelivery,
        media: MatrixMedia,
        is_direct: Callable[[str], bool],
        admits: Callable[[nio.Event], Awaitable[bool]],
    ) -> None:
        self._options = options
        self._delivery = delivery
        self._media = media
        self._is_direct = is_direct
        self._admits = admits
        self.account = options.user_id
        self.catching_up = False
        self._on_message: InboundHandler | None = None
        self._seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._noted_rooms: set[str] = set()

    def set_handler(self, on_message: InboundHandler | None) -> None:
        self._on_message = on_message

    async def on_message(self, room: nio.MatrixRoom, event: nio.RoomMessage) -> None:
        if self._on_message is None or self.catching_up or event.sender == self.account:
            return
        if isinstance(event, nio.RoomMessageNotice) or not isinstance(event, _TEXT_TYPES + MEDIA):
            return
        content: dict[str, Any] = event.source.get("content", {})
        found = content.get("m.relates_to")
        relation: dict[str, Any] = found if isinstance(found, dict) else {}
        if relation.get("rel_type") == "m.replace" or "m.new_content" in content:
            return
        if event.event_id in self._seen:
            return
        self._seen[event.event_id] = None
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        if not await self._admits(event):
            return
        try:
            inbound = await self._read(room, event, content, relation)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("matrix: could not read message %s in %s", event.event_id, room.room_id)
            return
        await self._call_handler(inbound)
        try:
            await self._delivery.receipt(room.room_id, event.event_id)
        except Exception as exc:  # a receipt is cosmetic
            log.debug("matrix: read receipt failed: %s", exc)

    async def on_undecryptable(self, room: nio.MatrixRoom, event: nio.MegolmEvent) -> None:
        if self.catching_up or event.sender == self.account:
            return
        log.warning(
            "matrix: cannot decrypt message %s in %s from %s (no room key for session %s); "
            "asking the sender's devices for it, the message is not answered",
            event.event_id,
            room.room_id,
            event.sender,
            event.session_id,
        )
        client = self._delivery.running()
        try:
            await client.request_room_key(event)
        except nio.LocalProtocolError as exc:
            log.debug("matrix: room key request not sent: %s", exc)

    def note_encrypted_room(self, room_id: str) -> None:
        """One log line per encrypted room the bot cannot read (encryption off or missing)."""
        if room_id in self._noted_rooms:
            return
        self._noted_rooms.add(room_id)
        log.error(
            "matrix: room %s is end-to-end encrypted but this bot cannot decrypt (set "
            "channels.matrix.encryption: true and install matrix-nio[e2e]); its messages "
            "are not answered",
            room_id,
        )

    async def _call_handler(self, inbound: Inbound) -> None:
        handler = self._on_message
        if handler is None:
            return
        try:
            await handler(inbound)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "matrix: the message handler failed for chat %s message %s",
                inbound.chat.chat_id,
                inbound.message_id,
            )

    async def _read(
        self,
        room: nio.MatrixRoom,
        event: nio.RoomMessage,
        content: dict[str, Any],
        relation: dict[str, Any],
    ) -> Inbound:
        bot_name = room.user_name(self.account) or ""
        images, attachments = [], []
        if isinstance(event, MEDIA):
            body, found_images, found_attachments = await self._media.read(event)
            images, attachments = list(found_images), list(found_attachments)
        else:
            body = str(content.get("body") or "")
        reply_to = _reply_target(relation)
        mentioned = mentions_bot(content, self.account, bot_name)
        if reply_to is not None:
            if reply_to in self._delivery.bot_events or fallback_sender(body) == self.account:
                mentioned = True
            body = strip_reply_fallback(body)
        text = strip_mention(body, self.account, bot_name)
        if isinstance(event, nio.RoomMessageEmote):
            text = f"* {room.user_name(event.sender) or event.sender} {text}"
        sender_name = room.user_name(event.sender) or event.sender
        if self._is_direct(room.room_id) or room.member_count == 2:
            self._delivery.remember_dm(event.sender, room.room_id)
            chat = ChatRef("matrix", self.account, "dm", event.sender, None, event.event_id)
        else:
            thread_id: str | None = None
            if relation.get("rel_type") == "m.thread" and isinstance(relation.get("event_id"), str):
                thread_id = relation["event_id"]
                if thread_id in self._delivery.bot_threads:
                    mentioned = True
            elif self._options.auto_thread and mentioned:
                thread_id = event.event_id
            if thread_id is not None and mentioned:
                self._delivery.remember_thread(thread_id)
            chat = ChatRef("matrix", self.account, "group", room.room_id, thread_id, event.event_id)
        return Inbound(
            chat=chat,
            sender_id=event.sender,
            text=text,
            message_id=event.event_id,
            sender_name=sender_name,
            mentioned=mentioned,
            images=tuple(images),
            attachments=tuple(attachments),
        )


def _reply_target(relation: dict[str, Any]) -> str | None:
    reply = relation.get("m.in_reply_to")
    if isinstance(reply, dict) and isinstance(reply.get("event_id"), str):
        if relation.get("is_falling_back"):
            return None  # a thread message's reply fallback, not a real reply
        return str(reply["event_id"])
    return None
