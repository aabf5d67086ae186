"""The mails Perch sends: a reply in its thread, as multipart/alternative, files attached.

`compose_reply` builds one message: `From` the channel's address and display name, `To` the
sender, `Subject: Re: ...`, `In-Reply-To` the mail answered, `References` its chain (so every
client threads it), a fresh `Message-ID` on the address's domain, and `Auto-Submitted:
auto-replied` (RFC 3834) so that other robots do not answer it. The body is the Markdown as
text/plain and the same rendered as simple text/html; files become attachments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid

from channels.email.headers import domain_of, formatted_address, reply_subject
from channels.email.render import render_email_html


@dataclass(frozen=True, slots=True)
class ReplyTo:
    """What a reply must say to land in its thread."""

    to: str
    subject: str
    in_reply_to: str
    references: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileOut:
    name: str
    media_type: str
    data: bytes


def compose_reply(
    address: str,
    display_name: str,
    reply: ReplyTo,
    markdown: str,
    files: Sequence[FileOut] = (),
) -> EmailMessage:
    """One reply mail (see the module docstring)."""
    import datetime

    message = EmailMessage()
    message["From"] = formatted_address(address, display_name)
    message["To"] = reply.to
    if reply.in_reply_to:
        message["Subject"] = reply_subject(reply.subject)
    else:  # a mail of Perch's own (a reminder, a notice), not an answer
        message["Subject"] = reply.subject or f"A message from {display_name}"
    message["Date"] = format_datetime(datetime.datetime.now(datetime.UTC))
    message["Message-ID"] = make_msgid(domain=domain_of(address))
    if reply.in_reply_to:
        message["In-Reply-To"] = f"<{reply.in_reply_to}>"
    if reply.references:
        message["References"] = " ".join(f"<{ref}>" for ref in reply.references)
    message["Auto-Submitted"] = "auto-replied"
    message["X-Auto-Response-Suppress"] = "All"  # Exchange: no out-of-office back to us
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    message.set_content(text, subtype="plain", cte="quoted-printable")
    message.add_alternative(render_email_html(markdown), subtype="html", cte="quoted-printable")
    for item in files:
        maintype, _, subtype = item.media_type.partition("/")
        if not subtype:
            maintype, subtype = "application", "octet-stream"
        message.add_attachment(item.data, maintype=maintype, subtype=subtype, filename=item.name)
    return message
