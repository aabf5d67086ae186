"""The email adapter against real servers: Dovecot (IMAP IDLE) and an aiosmtpd SMTP server.

A mail delivered into the bot's mailbox reaches the handler within seconds (IDLE, not the
five-minute poll), the reply goes out in its thread as multipart/alternative with
`Auto-Submitted: auto-replied`, a reply to that continues the thread, robots and lists are
never handed on, mail that came while the channel was stopped is taken once after it starts,
and handled mail is flagged `\\Seen` and moved to `processed_folder`.
"""

from __future__ import annotations

import asyncio
import imaplib
from collections.abc import AsyncIterator
from email.message import EmailMessage

import pytest

from channels.base import Inbound, Outbound, OutboundFile
from channels.email.adapter import EmailChannel
from channels.state import MemoryState
from tests.channels.email_support import email_options, mail
from tests.mail_servers import Dovecot, SmtpSink

pytestmark = pytest.mark.timeout(60)


class Bot:
    """A started email channel that answers every mail with "got: <text>"."""

    def __init__(self, channel: EmailChannel) -> None:
        self.channel = channel
        self.inbox: asyncio.Queue[Inbound] = asyncio.Queue()

    async def handle(self, inbound: Inbound) -> None:
        self.inbox.put_nowait(inbound)
        await self.channel.send(Outbound(inbound.chat, f"got: **{inbound.text.splitlines()[-1]}**"))

    async def next(self, within: float = 15.0) -> Inbound:
        return await asyncio.wait_for(self.inbox.get(), within)


@pytest.fixture
async def mailboxes(dovecot: Dovecot) -> tuple[str, str]:
    bot, _ = dovecot.new_mailbox("bot")
    alice, _ = dovecot.new_mailbox("alice")
    return bot, alice


@pytest.fixture
async def bot(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str]
) -> AsyncIterator[Bot]:
    channel = EmailChannel(email_options(dovecot, smtp_sink, mailboxes[0]))
    running = Bot(channel)
    await channel.start(running.handle)
    assert channel.status().up, channel.status().detail
    try:
        yield running
    finally:
        await channel.stop()


async def test_mail_is_answered_in_its_thread_within_seconds(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str], bot: Bot
) -> None:
    address, alice = mailboxes
    first = mail(alice, address, "What is the plan?", subject="Plans")
    dovecot.deliver(address, first.as_bytes(), alice)

    inbound = await bot.next()
    assert inbound.chat.chat_id == alice and inbound.sender_id == alice
    assert inbound.chat.thread_id == str(first["Message-ID"]).strip("<>")
    assert inbound.text == "Subject: Plans\n\nWhat is the plan?"
    reply = await smtp_sink.next()
    assert reply["To"] == alice and reply["From"] == f"Perch <{address}>"
    assert reply["Subject"] == "Re: Plans"
    assert reply["In-Reply-To"] == first["Message-ID"]
    assert reply["References"] == first["Message-ID"]
    assert reply["Auto-Submitted"] == "auto-replied"
    assert reply.get_content_type() == "multipart/alternative"
    plain = reply.get_body(preferencelist=("plain",))
    html = reply.get_body(preferencelist=("html",))
    assert plain is not None and plain.get_content().strip() == "got: **What is the plan?**"
    assert html is not None and "<strong>What is the plan?</strong>" in html.get_content()

    # Alice answers the reply from her own client: the same thread, history trimmed.
    answered = message_from(reply)
    second = mail(
        alice, address, "And tomorrow?\n\nOn Monday, Perch wrote:\n> got: it", reply_to=answered
    )
    dovecot.deliver(address, second.as_bytes(), alice)
    follow = await bot.next()
    assert follow.chat.thread_id == inbound.chat.thread_id
    assert follow.text == "And tomorrow?"
    again = await smtp_sink.next()
    assert again["Subject"] == "Re: Plans"
    assert again["In-Reply-To"] == second["Message-ID"]
    assert str(again["References"]).split() == [
        str(first["Message-ID"]),
        str(reply["Message-ID"]),
        str(second["Message-ID"]),
    ]


async def test_robots_lists_and_own_mail_are_never_handed_on(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str], bot: Bot
) -> None:
    address, alice = mailboxes
    robots = [
        mail(alice, address, "I am away", headers={"Auto-Submitted": "auto-replied"}),
        mail(alice, address, "News", headers={"List-Id": "<news.example.test>"}),
        mail(alice, address, "Sale", headers={"Precedence": "bulk"}),
        mail(address, address, "Myself"),
    ]
    for message in robots:
        dovecot.deliver(address, message.as_bytes(), alice)
    dovecot.deliver(address, mail(alice, address, "Undeliverable").as_bytes(), "")  # bounce
    dovecot.deliver(address, mail(alice, address, "A person").as_bytes(), alice)

    inbound = await bot.next()
    assert inbound.text.endswith("A person")  # the only one handed on, after all the others
    await smtp_sink.next()
    assert bot.inbox.empty() and smtp_sink.nothing_more()


async def test_mail_that_came_while_stopped_is_taken_once_after_start(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str]
) -> None:
    address, alice = mailboxes
    options = email_options(dovecot, smtp_sink, address, processed_folder="Done")
    state = MemoryState()  # the store's part, kept across the restart
    dovecot.deliver(address, mail(alice, address, "Before the first start").as_bytes(), alice)

    first = Bot(EmailChannel(options, state))
    await first.channel.start(first.handle)
    dovecot.deliver(address, mail(alice, address, "While running").as_bytes(), alice)
    assert (await first.next()).text.endswith("While running")
    await first.channel.stop()

    dovecot.deliver(address, mail(alice, address, "While stopped").as_bytes(), alice)
    second = Bot(EmailChannel(options, state))
    await second.channel.start(second.handle)
    try:
        assert (await second.next()).text.endswith("While stopped")
        await smtp_sink.next()
        await smtp_sink.next()
        dovecot.deliver(address, mail(alice, address, "After").as_bytes(), alice)
        assert (await second.next()).text.endswith("After")  # nothing else came before it
    finally:
        await second.channel.stop()
    # Handled mail was moved to Done and flagged \Seen; the mail from before the first
    # start was left alone, unread.
    inbox, done = await asyncio.to_thread(_folders, dovecot, address)
    assert inbox == [("Before the first start", False)]
    assert sorted(done) == [("After", True), ("While running", True), ("While stopped", True)]


async def test_files_go_out_as_attachments_in_the_thread(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str], bot: Bot
) -> None:
    address, alice = mailboxes
    dovecot.deliver(address, mail(alice, address, "Send me the report").as_bytes(), alice)
    inbound = await bot.next()
    await smtp_sink.next()
    await bot.channel.send_file(
        OutboundFile(inbound.chat, "report.csv", "text/csv", b"a,b\n1,2\n", caption="Here it is")
    )
    sent = await smtp_sink.next()
    assert sent["In-Reply-To"] == f"<{inbound.message_id}>"
    files = list(sent.iter_attachments())
    assert [(f.get_filename(), f.get_content_type()) for f in files] == [("report.csv", "text/csv")]
    assert files[0].get_payload(decode=True) == b"a,b\n1,2\n"


def message_from(sent: EmailMessage) -> EmailMessage:
    return sent


def _folders(
    dovecot: Dovecot, address: str
) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """(text, seen) of each mail in INBOX and in Done, read with the stdlib's IMAP client."""
    client = imaplib.IMAP4("127.0.0.1", dovecot.imap_port)
    client.login(address, dovecot.passwords[address])
    found = []
    for folder in ("INBOX", "Done"):
        client.select(folder)
        _, data = client.uid("FETCH", "1:*", "(FLAGS BODY.PEEK[TEXT])")
        items = []
        for entry in data:
            if isinstance(entry, tuple):
                seen = b"\\Seen" in entry[0]
                items.append((entry[1].decode().strip(), seen))
        found.append(items)
    client.logout()
    return found[0], found[1]


async def test_html_mail_and_attachments_reach_the_handler(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str], bot: Bot
) -> None:
    address, alice = mailboxes
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    message = mail(alice, address, "", subject="Pictures")
    message.clear_content()
    message.set_content("<p>Look at <b>this</b></p><p>and the notes</p>", subtype="html")
    message.add_attachment(png, maintype="image", subtype="png", filename="cat.png")
    message.add_attachment(b"RIFF....WAVE", maintype="audio", subtype="wav", filename="memo.wav")
    message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="a.pdf")
    dovecot.deliver(address, message.as_bytes(), alice)
    inbound = await bot.next()
    assert inbound.text == "Subject: Pictures\n\nLook at this\n\nand the notes"
    assert [(i.media_type, i.data) for i in inbound.images] == [("image/png", png)]
    assert [(a.kind, a.name, a.media_type, a.data) for a in inbound.attachments] == [
        ("audio", "memo.wav", "audio/wav", b"RIFF....WAVE"),
        ("file", "a.pdf", "application/pdf", b"%PDF-1.4"),
    ]


async def test_without_idle_the_folder_is_polled(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str]
) -> None:
    address, alice = mailboxes
    options = email_options(dovecot, smtp_sink, address)
    polled = options.model_copy(
        update={"imap": options.imap.model_copy(update={"idle": False, "poll_s": 0.2})}
    )
    running = Bot(EmailChannel(polled))
    await running.channel.start(running.handle)
    try:
        assert "polling every 0.2 s" in running.channel.status().detail
        dovecot.deliver(address, mail(alice, address, "Polled").as_bytes(), alice)
        assert (await running.next()).text.endswith("Polled")
    finally:
        await running.channel.stop()


async def test_a_dropped_connection_is_reopened_and_nothing_is_missed(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str], bot: Bot
) -> None:
    address, alice = mailboxes
    dovecot.kick(address)  # the server closes every session of the bot's mailbox
    dovecot.deliver(address, mail(alice, address, "After the drop").as_bytes(), alice)
    assert (await bot.next()).text.endswith("After the drop")
    assert bot.channel.status().up


async def test_under_require_auth_dmarc_only_verified_senders_are_handed_on(
    dovecot: Dovecot, smtp_sink: SmtpSink, mailboxes: tuple[str, str]
) -> None:
    address, alice = mailboxes
    options = email_options(dovecot, smtp_sink, address, require_auth="dmarc")
    running = Bot(EmailChannel(options))
    await running.channel.start(running.handle)
    try:
        forged = mail(alice, address, "Trust me")  # no verdict of our server's: not believed
        dovecot.deliver(address, forged.as_bytes(), alice)
        verified = mail(alice, address, "Verified",
                        headers={"Authentication-Results": "mx.example.test; dmarc=pass"})  # fmt: skip
        dovecot.deliver(address, verified.as_bytes(), alice)
        assert (await running.next()).text.endswith("Verified")
        await smtp_sink.next()
        assert running.inbox.empty() and smtp_sink.nothing_more()
    finally:
        await running.channel.stop()
