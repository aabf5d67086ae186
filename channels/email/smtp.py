"""The SMTP side: one connection per mail sent, over aiosmtplib.

`send_mail` connects (implicit TLS, STARTTLS or, to 127.0.0.1 only, plain), says EHLO, logs
in and sends; `check_login` does all of that but the sending (the doctor's live check). A
reply is one mail every few minutes at most, so no connection is kept open between them.
Errors come out as `SmtpError` with the server's words, never the password.
"""

from __future__ import annotations

from email.message import EmailMessage

import aiosmtplib

from channels.email.imap import tls_context
from channels.email.options import SmtpOptions


class SmtpError(Exception):
    """Sending failed; the message says where and why, in the server's words."""


def _client(options: SmtpOptions, username: str) -> aiosmtplib.SMTP:
    return aiosmtplib.SMTP(
        hostname=options.host,
        port=options.real_port(),
        username=username,
        password=options.password,
        use_tls=options.tls == "ssl",
        start_tls=options.tls == "starttls",
        tls_context=tls_context() if options.tls != "none" else None,
        timeout=options.timeout_s,
    )


async def send_mail(options: SmtpOptions, username: str, message: EmailMessage) -> None:
    """Send `message` to its `To`, from its `From` (see the module docstring)."""
    client = _client(options, username)
    try:
        async with client:
            await client.send_message(message)
    except aiosmtplib.SMTPException as exc:
        raise SmtpError(f"SMTP {options.host}:{options.real_port()}: {_said(exc)}") from None
    except OSError as exc:
        raise SmtpError(f"SMTP {options.host}:{options.real_port()}: {exc}") from None


async def check_login(options: SmtpOptions, username: str) -> str:
    """Connect, EHLO and log in; the server's greeting line. `SmtpError` if refused."""
    client = _client(options, username)
    try:
        async with client:
            return " ".join(str(client.last_ehlo_response or "").split())[:120]
    except aiosmtplib.SMTPException as exc:
        raise SmtpError(_said(exc)) from None
    except OSError as exc:
        raise SmtpError(str(exc)) from None


def _said(exc: aiosmtplib.SMTPException) -> str:
    text = getattr(exc, "message", "") or str(exc)
    return " ".join(str(text).split())[:200]
