"""The email plug-in as the registry sees it: options, factory, capabilities, doctor probe.

The probe is the live check `perch doctor` and `perch onboard` run: an IMAP login that opens
the watched folder, and an SMTP connection that says EHLO and logs in (nothing is sent).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from channels.base import Channel
from channels.email.errors import one_line
from channels.email.options import EmailOptions
from channels.options import ChannelOptions
from channels.plugin import Capabilities, ChannelContext, ChannelPlugin, ProbeResult

if TYPE_CHECKING:
    import aiohttp


def create(options: ChannelOptions, context: ChannelContext) -> Channel:
    from channels.email.adapter import EmailChannel

    assert isinstance(options, EmailOptions)
    return EmailChannel(options, context.state)


async def probe(options: ChannelOptions, http: aiohttp.ClientSession) -> ProbeResult:
    """IMAP login + folder, then SMTP EHLO + login."""
    from channels.email.imap import open_session
    from channels.email.smtp import SmtpError, check_login

    assert isinstance(options, EmailOptions)
    imap, smtp = options.imap, options.smtp
    where = f"IMAP {imap.host}:{imap.real_port()}"
    try:
        session = await open_session(imap, imap.username or options.address)
        try:
            folder = await session.select(imap.folder)
            idle = session.has("IDLE")
        finally:
            await session.close()
    except Exception as exc:
        return ProbeResult(
            False,
            f"{where}: {one_line(exc)}",
            "check channels.email.imap (host, port, tls, username, password: an app password "
            "where the provider asks for one)",
        )
    try:
        await check_login(smtp, smtp.username or options.address)
    except SmtpError as exc:
        return ProbeResult(
            False,
            f"SMTP {smtp.host}:{smtp.real_port()}: {exc}",
            "check channels.email.smtp (host, port, tls, username, password)",
        )
    push = "IDLE" if idle and imap.idle else f"polling every {imap.poll_s:g} s"
    return ProbeResult(
        True,
        f"{options.address}: {where} {imap.folder} (UIDVALIDITY {folder.uidvalidity}, {push}); "
        f"SMTP {smtp.host}:{smtp.real_port()} login ok",
    )


PLUGIN = ChannelPlugin(
    key="email",
    options=EmailOptions,
    create=create,
    capabilities=Capabilities(
        can_edit=False,
        can_type=False,
        can_react=False,
        max_upload_bytes=20_000_000,
        photos=False,
        max_len=100_000,  # one mail per reply: never cut
        chat_hint="You are replying by email, in the thread of the mail you answer. Markdown "
        "renders (bold, italic, links, lists, code); write as in a letter, plainly, and "
        "answer the mail's questions in one message.",
    ),
    probe=probe,
    redact=(re.compile(r"(?i)(AUTH (?:PLAIN|LOGIN) )\S+"),),
    quiet_loggers=("aioimaplib.aioimaplib", "aiosmtplib"),
    single_receiver=lambda options: True,  # two instances watching one mailbox answer twice
)
