"""What the email tests share: options for a Dovecot mailbox and mails as clients write them."""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import make_msgid
from typing import Any

from channels.email.options import EmailOptions
from tests.mail_servers import Dovecot, SmtpSink


def email_settings(dovecot: Dovecot, sink: SmtpSink, address: str, **extra: Any) -> dict[str, Any]:
    """`channels.email` for a bot mailbox on the test servers (plain, on 127.0.0.1)."""
    password = dovecot.passwords[address]
    settings: dict[str, Any] = {
        "enabled": True,
        "address": address,
        "display_name": "Perch",
        "imap": {
            "host": "127.0.0.1",
            "port": dovecot.imap_port,
            "tls": "none",
            "password": password,
            "poll_s": 300,  # a reply within seconds can only come from IDLE
        },
        "smtp": {"host": "127.0.0.1", "port": sink.port, "tls": "none", "password": password},
        "require_auth": "none",
        "dm_policy": "allowlist",
        "allow_from": ["@example.test"],
        "reconnect_initial": 0.1,
        "reconnect_max": 0.5,
    }
    settings.update(extra)
    return settings


def email_options(dovecot: Dovecot, sink: SmtpSink, address: str, **extra: Any) -> EmailOptions:
    return EmailOptions.model_validate(email_settings(dovecot, sink, address, **extra))


def mail(
    sender: str,
    to: str,
    text: str,
    *,
    subject: str = "Hello",
    reply_to: EmailMessage | None = None,
    headers: dict[str, str] | None = None,
    html: str | None = None,
) -> EmailMessage:
    """A mail as a person's client writes it (a reply threads under `reply_to`)."""
    message = EmailMessage()
    message["From"] = f"Alice <{sender}>"
    message["To"] = to
    message["Message-ID"] = make_msgid(domain="example.test")
    if reply_to is not None:
        parent = str(reply_to["Message-ID"])
        message["Subject"] = "Re: " + str(reply_to["Subject"]).removeprefix("Re: ")
        message["In-Reply-To"] = parent
        message["References"] = " ".join(
            filter(None, [str(reply_to.get("References", "")), parent])
        )
    else:
        message["Subject"] = subject
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(text)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message
