"""One fetched mail read into what the adapter needs: who, which thread, the text, the files.

`read_mail(raw, ...)` parses the bytes (the `email` package's modern policy), prefers the
text/plain body and falls back to the HTML one turned into text, trims quoted history and
signatures, and sorts attachments: images the model can see (within `max_image_bytes`, else
a note in the text), audio and other files as `Attachment`s (within `max_file_bytes`, else
without data). It decides nothing about answering: `guards` and `authenticity` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from email import message_from_bytes, policy
from email.message import EmailMessage, Message, MIMEPart

from channels.base import Attachment, Image, image_too_large
from channels.email.body import html_to_text, trim_reply
from channels.email.headers import own_id, references_for_reply, sender, thread_root

SUPPORTED_IMAGES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class MailIn:
    """A mail as the adapter uses it; `references` are those a reply to it carries."""

    message: Message
    sender: str
    sender_name: str
    message_id: str
    thread: str
    subject: str
    references: tuple[str, ...]
    text: str
    images: tuple[Image, ...] = ()
    attachments: tuple[Attachment, ...] = ()


def parse(raw: bytes) -> EmailMessage:
    message = message_from_bytes(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def read_mail(
    raw: bytes,
    message: EmailMessage,
    *,
    max_text_chars: int,
    max_image_bytes: int,
    max_file_bytes: int,
) -> MailIn:
    address, name = sender(message)
    text, notes, images, attachments = _contents(message, max_image_bytes, max_file_bytes)
    text = trim_reply(text)
    if len(text) > max_text_chars:
        text = text[:max_text_chars] + "\n[the rest of this mail was cut]"
    subject = " ".join(str(message.get("Subject", "")).split())
    if subject and not text.startswith("/") and not subject.lower().startswith(("re:", "aw:")):
        text = f"Subject: {subject}\n\n{text}" if text else f"Subject: {subject}"
    if notes:
        text = "\n".join([text, *notes]).strip()
    return MailIn(
        message=message,
        sender=address,
        sender_name=name,
        message_id=own_id(message, raw),
        thread=thread_root(message, raw),
        subject=subject,
        references=tuple(references_for_reply(message, raw)),
        text=text,
        images=tuple(images),
        attachments=tuple(attachments),
    )


def _contents(
    message: EmailMessage, max_image_bytes: int, max_file_bytes: int
) -> tuple[str, list[str], list[Image], list[Attachment]]:
    body = message.get_body(preferencelist=("plain", "html"))
    text = ""
    if body is not None:
        content = _text_of(body)
        text = html_to_text(content) if body.get_content_type() == "text/html" else content
    notes: list[str] = []
    images: list[Image] = []
    attachments: list[Attachment] = []
    for part in message.iter_attachments():
        if not isinstance(part, EmailMessage) or part.is_multipart():
            continue
        kind = part.get_content_type()
        name = part.get_filename() or "attachment"
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            continue
        if kind in SUPPORTED_IMAGES:
            if len(data) > max_image_bytes:
                notes.append(image_too_large(max_image_bytes, len(data)))
            else:
                images.append(Image(kind, data))
            continue
        audio = kind.startswith("audio/")
        attachments.append(
            Attachment(
                "audio" if audio else "file",
                name,
                kind,
                data if len(data) <= max_file_bytes else None,
                size=len(data),
            )
        )
    return text.replace("\r\n", "\n"), notes, images, attachments


def _text_of(part: MIMEPart) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset: read it as Latin-1, lose nothing
        payload = part.get_payload(decode=True)
        content = payload.decode("latin-1") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""
