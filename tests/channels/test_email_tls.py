"""The email channel's encryption and live check against the test Dovecot: implicit TLS and
STARTTLS with the certificate checked (a certificate nobody vouches for is refused), and the
probe `perch doctor` runs (IMAP login + folder, SMTP EHLO + login) reporting what it found."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from channels.base import ChatRef, Inbound, Outbound
from channels.email.adapter import EmailChannel
from channels.email.plugin import PLUGIN
from channels.email.smtp import SmtpError
from tests.certificates import self_signed
from tests.channels.email_support import email_options, mail
from tests.mail_servers import Dovecot, SmtpSink, smtp_server

pytestmark = pytest.mark.timeout(60)


def tls_imap(dovecot: Dovecot, password: str, mode: str) -> dict[str, object]:
    port = dovecot.imaps_port if mode == "ssl" else dovecot.imap_port
    return {"host": "127.0.0.1", "port": port, "tls": mode, "password": password, "poll_s": 300}


@pytest.mark.parametrize("mode", ["ssl", "starttls"])
async def test_mail_arrives_over_tls_with_the_certificate_checked(
    mode: str, dovecot: Dovecot, smtp_sink: SmtpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.cert))
    bot, password = dovecot.new_mailbox("bot")
    alice, _ = dovecot.new_mailbox("alice")
    options = email_options(dovecot, smtp_sink, bot, imap=tls_imap(dovecot, password, mode))
    channel = EmailChannel(options)
    inbox: asyncio.Queue[Inbound] = asyncio.Queue()

    async def take(inbound: Inbound) -> None:
        inbox.put_nowait(inbound)

    await channel.start(take)
    try:
        assert channel.status().up, channel.status().detail
        dovecot.deliver(bot, mail(alice, bot, "over TLS").as_bytes(), alice)
        inbound = await asyncio.wait_for(inbox.get(), 15)
        assert inbound.text.endswith("over TLS")
    finally:
        await channel.stop()


@pytest.mark.parametrize("mode", ["ssl", "starttls"])
async def test_a_certificate_nobody_vouches_for_is_refused(
    mode: str, tmp_path: Path, dovecot: Dovecot, smtp_sink: SmtpSink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    other, _ = self_signed(tmp_path, "127.0.0.1")
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    bot, password = dovecot.new_mailbox("bot")
    options = email_options(dovecot, smtp_sink, bot, imap=tls_imap(dovecot, password, mode))
    assert PLUGIN.probe is not None
    async with aiohttp.ClientSession() as http:
        result = await PLUGIN.probe(options, http)
    assert not result.ok
    assert "CERTIFICATE_VERIFY_FAILED" in result.detail or "certificate" in result.detail.lower()
    assert "channels.email.imap" in result.fix


async def test_the_probe_logs_in_to_both_servers(dovecot: Dovecot, smtp_sink: SmtpSink) -> None:
    bot, _ = dovecot.new_mailbox("bot")
    options = email_options(dovecot, smtp_sink, bot)
    assert PLUGIN.probe is not None
    async with aiohttp.ClientSession() as http:
        result = await PLUGIN.probe(options, http)
        assert result.ok, result.detail
        assert bot in result.detail and "IDLE" in result.detail and "SMTP" in result.detail

        wrong = options.model_copy(
            update={"smtp": options.smtp.model_copy(update={"password": "wrong"})}
        )
        refused = await PLUGIN.probe(wrong, http)
        assert not refused.ok and refused.detail.startswith("SMTP")
        assert "wrong" not in refused.detail

        no_login = options.model_copy(
            update={"imap": options.imap.model_copy(update={"password": "wrong"})}
        )
        refused = await PLUGIN.probe(no_login, http)
        assert not refused.ok and "login" in refused.detail and "wrong" not in refused.detail


@pytest.mark.parametrize("mode", ["ssl", "starttls"])
async def test_replies_go_out_over_tls_with_the_certificate_checked(
    mode: str, tmp_path: Path, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot, password = dovecot.new_mailbox("bot")
    alice, _ = dovecot.new_mailbox("alice")
    async with smtp_server(dovecot, mode) as sink:
        smtp = {"host": "127.0.0.1", "port": sink.port, "tls": mode, "password": password}
        options = email_options(dovecot, sink, bot, smtp=smtp)
        monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.cert))
        channel = EmailChannel(options)
        chat = ChatRef("email", bot, "dm", alice, "root@example.test", "root@example.test")
        await channel.send(Outbound(chat, "over TLS"))
        sent = await sink.next()
        assert sent["To"] == alice and sent["In-Reply-To"] == "<root@example.test>"

        other, _ = self_signed(tmp_path, "127.0.0.1")
        monkeypatch.setenv("SSL_CERT_FILE", str(other))
        with pytest.raises(SmtpError, match=r"(?i)certificate"):
            await EmailChannel(options).send(Outbound(chat, "not sent"))
        assert sink.nothing_more()
