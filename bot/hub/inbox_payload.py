"""The inbox row's payload: an `Inbound` as JSON-ready data and back.

The gateway writes every message to the inbox before anything else, so a crash or a
take-over by another instance can re-run it; these two functions are that row's format.
Images travel base64-encoded; an unreadable payload is logged and skipped, never raised.
`well_formed` replaces lone UTF-16 surrogates and NUL (valid in a platform's JSON escapes,
refused by the databases or model APIs) before anything is stored; NUL in the message text
is left for the input guard, which reports it and keeps it from the model. `where` names a
message's chat and sender for the log lines of the gateway and the recovery.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import time
from typing import Any

from agents.surrogates import fix_text, needs_fixing
from bot.media.intake import attachments_from_payload, attachments_to_payload
from channels.base import ChatRef, Image, Inbound

log = logging.getLogger(__name__)


def well_formed(inbound: Inbound) -> Inbound:
    """`inbound` with each lone surrogate (and NUL, but in the text) in its strings replaced
    by U+FFFD (the same object when there is none, the usual case)."""
    chat = inbound.chat
    text = fix_text(inbound.text, keep_nul=True)  # its NUL is the input guard's to report
    others = [
        inbound.sender_id,
        inbound.sender_name,
        inbound.message_id,
        chat.account,
        chat.chat_id,
        chat.thread_id or "",
        chat.reply_to or "",
        *(a.name for a in inbound.attachments),
    ]
    if text is inbound.text and not needs_fixing("".join(others)):
        return inbound
    chat = dataclasses.replace(
        chat,
        account=fix_text(chat.account),
        chat_id=fix_text(chat.chat_id),
        thread_id=fix_text(chat.thread_id) if chat.thread_id else chat.thread_id,
        reply_to=fix_text(chat.reply_to) if chat.reply_to else chat.reply_to,
    )
    return dataclasses.replace(
        inbound,
        chat=chat,
        text=text,
        sender_id=fix_text(inbound.sender_id),
        sender_name=fix_text(inbound.sender_name),
        message_id=fix_text(inbound.message_id),
        attachments=tuple(
            dataclasses.replace(a, name=fix_text(a.name)) for a in inbound.attachments
        ),
    )


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


def where(inbound: Inbound) -> str:
    """A message's chat and sender, for the log."""
    chat = inbound.chat
    return f"{chat.channel}:{chat.kind}:{chat.chat_id} (sender {inbound.sender_id})"
