"""Email end to end: the whole daemon, a real Dovecot and SMTP server, the fake model.

A mail is answered in its thread by the model, a reply in the thread continues the same
session (`agent:main:email:<bot>:dm:<sender>:thread:<root>`), a stranger gets a pairing code
by mail and is answered once the owner approves, a sender outside `allow_from` under
`dm_policy: allowlist` gets nothing, and mail that came while Perch was stopped is answered
once after it starts again (the IMAP cursor is kept in the store).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.daemon import Daemon
from bot.kernel.sessions import SessionKey
from tests.channels.email_support import email_settings, mail
from tests.fakes.anthropic import FakeAnthropic, last_user_text
from tests.harness import make_config
from tests.mail_servers import Dovecot, SmtpSink

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def daemon_for(
    tmp_path: Path, model: FakeAnthropic, dovecot: Dovecot, smtp: SmtpSink, bot: str, **policy: Any
) -> Daemon:
    settings = email_settings(dovecot, smtp, bot, **policy)
    return Daemon(make_config(tmp_path, model.base_url, {"channels.email": settings}))


async def test_a_thread_is_one_session_and_restarts_lose_nothing(
    tmp_path: Path, model: FakeAnthropic, dovecot: Dovecot, smtp_sink: SmtpSink
) -> None:
    bot, _ = dovecot.new_mailbox("bot")
    alice, _ = dovecot.new_mailbox("alice")
    daemon = daemon_for(tmp_path, model, dovecot, smtp_sink, bot, allow_from=[alice])
    await daemon.start()
    try:
        first = mail(alice, bot, "Remind me of the plan", subject="Plan")
        dovecot.deliver(bot, first.as_bytes(), alice)
        reply = await smtp_sink.next(within=30)
        assert reply["In-Reply-To"] == first["Message-ID"] and reply["Subject"] == "Re: Plan"
        plain = reply.get_body(preferencelist=("plain",))
        assert plain is not None and "Remind me of the plan" in plain.get_content()

        second = mail(alice, bot, "And the budget?\n\n> earlier text", reply_to=reply)
        dovecot.deliver(bot, second.as_bytes(), alice)
        await smtp_sink.next(within=30)
        assert last_user_text(model.requests[-1]).endswith("And the budget?")
        assert "Remind me of the plan" in str(model.requests[-1]["messages"])  # same session
        assert daemon.store is not None
        keys = [s.key for s in await daemon.store.list_sessions()]
        root = str(first["Message-ID"]).strip("<>")
        expected = str(SessionKey("main", "dm", "email", bot, alice, thread_id=root))
        assert keys == [expected]
        assert expected.startswith(f"agent:main:email:{bot}:dm:{alice}:thread:")
    finally:
        await daemon.stop()

    dovecot.deliver(bot, mail(alice, bot, "Written while Perch was down").as_bytes(), alice)
    again = daemon_for(tmp_path, model, dovecot, smtp_sink, bot, allow_from=[alice])
    await again.start()
    try:
        late = await smtp_sink.next(within=30)
        late_text = late.get_body(preferencelist=("plain",))
        assert late_text is not None and "Written while Perch was down" in late_text.get_content()
        dovecot.deliver(bot, mail(alice, bot, "One more").as_bytes(), alice)
        last = await smtp_sink.next(within=30)
        last_text = last.get_body(preferencelist=("plain",))
        assert last_text is not None and "One more" in last_text.get_content()
        assert len(model.requests) == 4  # nothing was answered twice
    finally:
        await again.stop()


async def test_strangers_pair_by_mail_and_outsiders_get_nothing(
    tmp_path: Path, model: FakeAnthropic, dovecot: Dovecot, smtp_sink: SmtpSink
) -> None:
    bot, _ = dovecot.new_mailbox("bot")
    owner, _ = dovecot.new_mailbox("owner")
    stranger, _ = dovecot.new_mailbox("stranger")
    daemon = daemon_for(
        tmp_path, model, dovecot, smtp_sink, bot, dm_policy="pairing", allow_from=[owner]
    )
    await daemon.start()
    try:
        dovecot.deliver(bot, mail(stranger, bot, "Hello, who are you?").as_bytes(), stranger)
        sent = [await smtp_sink.next(within=30), await smtp_sink.next(within=30)]
        to_stranger = next(m for m in sent if m["To"] == stranger)
        body = to_stranger.get_body(preferencelist=("plain",))
        assert body is not None
        code = re.search(r"\b([A-Z2-9]{8})\b", body.get_content())
        assert code is not None and "perch pairing approve email" in body.get_content()
        assert model.requests == []
        assert daemon.store is not None
        assert await daemon.store.pairing_approve("email", code.group(1)) is not None

        dovecot.deliver(bot, mail(stranger, bot, "Now may I?").as_bytes(), stranger)
        answer = await smtp_sink.next(within=30)
        assert answer["To"] == stranger and len(model.requests) == 1
    finally:
        await daemon.stop()


async def test_a_sender_outside_allow_from_is_not_answered(
    tmp_path: Path, model: FakeAnthropic, dovecot: Dovecot, smtp_sink: SmtpSink
) -> None:
    bot, _ = dovecot.new_mailbox("bot")
    alice, _ = dovecot.new_mailbox("alice")
    daemon = daemon_for(
        tmp_path, model, dovecot, smtp_sink, bot, dm_policy="allowlist", allow_from=[alice]
    )
    await daemon.start()
    try:
        outsider = "mallory@elsewhere.test"
        dovecot.deliver(bot, mail(outsider, bot, "Answer me").as_bytes(), outsider)
        dovecot.deliver(bot, mail(alice, bot, "Me too").as_bytes(), alice)
        reply = await smtp_sink.next(within=30)  # after the outsider's, which got nothing
        assert reply["To"] == alice
        assert smtp_sink.nothing_more() and len(model.requests) == 1
        assert "Me too" in last_user_text(model.requests[0])

        # /stop by replying /stop (the quoted mail below it trimmed): a command, not a turn
        stop = mail(alice, bot, "/stop\n\nOn Monday, Perch wrote:\n> echo: Me too", reply_to=reply)
        dovecot.deliver(bot, stop.as_bytes(), alice)
        answer = await smtp_sink.next(within=30)
        text = answer.get_body(preferencelist=("plain",))
        assert text is not None and text.get_content().strip() == "Nothing to stop."
        assert answer["In-Reply-To"] == stop["Message-ID"] and len(model.requests) == 1
    finally:
        await daemon.stop()
