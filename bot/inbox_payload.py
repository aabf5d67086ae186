"""The inbox row's payload: an `Inbound` as JSON-ready data and back.

The gateway writes every message to the inbox before anything else, so a crash or a
take-over by another instance can re-run it; these two functions are that row's format.
Images travel base64-encoded; an unreadable payload is logged and skipped, never raised.
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

from bot.media import attachments_from_payload, attachments_to_payload
from channels.base import ChatRef, Image, Inbound

log = logging.getLogger(__name__)


def inbound_to_payload(inbound: Inbound) -> dict[str, Any]:
    chat = inbound.chat
    return {
        "chat": {
            "channel": chat.channel,
            "account": chat.account,
            "kind": chat.kind,
            "chat_id": chat.chat_id,
            "thread_id": chat.thread_id,
            "reply_to": chat.reply_to,
        },
        "sender_id": inbound.sender_id,
        "sender_name": inbound.sender_name,
        "text": inbound.text,
        "message_id": inbound.message_id,
        "mentioned": inbound.mentioned,
        "images": [
            {"media_type": i.media_type, "data": base64.b64encode(i.data).decode("ascii")}
            for i in inbound.images
        ],
        "attachments": attachments_to_payload(inbound.attachments),
        "received_at": inbound.received_at,
    }


def inbound_from_payload(payload: dict[str, Any]) -> Inbound | None:
    try:
        chat = ChatRef(**payload["chat"])
        images = tuple(
            Image(i["media_type"], base64.b64decode(i["data"])) for i in payload.get("images", ())
        )
        return Inbound(
            chat=chat,
            sender_id=payload["sender_id"],
            sender_name=payload.get("sender_name", ""),
            text=payload["text"],
            message_id=payload["message_id"],
            mentioned=payload.get("mentioned", False),
            images=images,
            attachments=attachments_from_payload(payload.get("attachments", ())),
            received_at=payload.get("received_at", time.time()),
        )
    except (KeyError, TypeError, ValueError):
        log.warning("unreadable inbox payload skipped")
        return None
