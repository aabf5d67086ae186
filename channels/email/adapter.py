"""The email adapter: a mailbox Perch answers, read over IMAP and answered over SMTP.

Owns the channel's lifecycle and the path of one mail: fetched (`mailbox`), parsed
(`inbound`), refused when no reply may go out (`guards`: auto-replies, lists, bounces, our
own address; `authenticity`: a From address `require_auth` does not believe; the hourly
budget per sender), then handed to the daemon as a DM whose thread is the mail thread
(`chat_id` the sender's address, `thread_id` the thread's root Message-ID), flagged `\\Seen`
and moved to `processed_folder` when one is set. Mail refused is left unread for its owner.

Replies (`send`, `send_file`) go out as one mail each through `compose` and `smtp`: in the
thread of the mail they answer (remembered per message id, for the last 2,000 mails; a reply
for a thread it no longer remembers still carries the root as `In-Reply-To`). The reply goes
to the authenticated From address, never to a `Reply-To`, which anyone can set. Email has no
previews or typing: `reply_stream` sends only the final text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from contextlib import AbstractAsyncContextManager

from channels.background import BackgroundTasks
from channels.base import (
    ChannelStatus,
    ChatRef,
    FinalOnlyStream,
    Inbound,
    InboundHandler,
    Outbound,
    OutboundFile,
    ReplyStream,
)
from channels.email.authenticity import believed
from channels.email.compose import FileOut, ReplyTo, compose_reply
from channels.email.errors import one_line
from channels.email.guards import ReplyBudget, why_not_answer
from channels.email.headers import domain_of
from channels.email.imap import ImapError, ImapSession
from channels.email.inbound import MailIn, parse, read_mail
from channels.email.mailbox import MailboxWatcher
from channels.email.options import EmailOptions
from channels.email.smtp import SmtpError, send_mail
from channels.state import ChannelState, MemoryState

log = logging.getLogger(__name__)

_REMEMBERED = 2000
_START_WAIT = 10.0
_SEND_ATTEMPTS = 3
_STOP_WAIT = 10.0


class EmailChannel:
    """The email adapter (see the module docstring). `account` is the mailbox's address."""

    name = "email"

    def __init__(self, options: EmailOptions, state: ChannelState | None = None) -> None:
        self._options = options
        self._address = options.address.lower()
        self._smtp_user = options.smtp.username or options.address
        self._budget = ReplyBudget(options.max_replies_per_hour)
        self._replies: OrderedDict[str, ReplyTo] = OrderedDict()
        self._on_message: InboundHandler | None = None
        self._status = ChannelStatus(self.name, False, "not started")
        self._tasks = BackgroundTasks(log, self.name)
        self._watcher = MailboxWatcher(
            options, state if state is not None else MemoryState(), self._take, self._set_status
        )

    @property
    def account(self) -> str:
        return self._address

    async def start(self, on_message: InboundHandler) -> None:
        self._on_message = on_message
        self._tasks.spawn(self._watcher.run(), "imap watcher")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._watcher.attempted.wait(), _START_WAIT)

    async def stop(self) -> None:
        """Stop watching, after the mail being handed on (if any) is done, within 10 s."""
        acquired = False
        try:
            acquired = await asyncio.wait_for(self._watcher.busy.acquire(), _STOP_WAIT)
        except TimeoutError:
            log.warning("email: a mail was still being handed on at stop; it will come again")
        try:
            await self._tasks.cancel_all(timeout=5.0)
        finally:
            if acquired:
                self._watcher.busy.release()
        self._status = ChannelStatus(self.name, False, "stopped")

    def status(self) -> ChannelStatus:
        return self._status

    def typing(self, chat: ChatRef) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()

    def reply_stream(self, chat: ChatRef) -> ReplyStream:
        return FinalOnlyStream(self.send, chat)

    async def send(self, out: Outbound) -> None:
        if out.text.strip():
            await self._send(out.chat, out.text, ())

    async def send_file(self, out: OutboundFile) -> None:
        await self._send(out.chat, out.caption, (FileOut(out.name, out.media_type, out.data),))

    # -- one mail in --

    async def _take(self, session: ImapSession, uid: int) -> None:
        raw = await session.fetch(uid)
        if raw is None:
            return
        options = self._options
        try:
            message = parse(raw)
            reason = why_not_answer(message, self._address)
            mail = read_mail(
                raw,
                message,
                max_text_chars=options.max_text_chars,
                max_image_bytes=options.max_image_bytes,
                max_file_bytes=options.max_file_bytes,
            )
        except Exception as exc:  # a mail the email package cannot read: skip it, keep it
            log.error("email: UID %d could not be read (%s); left unread", uid, one_line(exc))
            return
        if reason is not None:
            log.info("email: UID %d not answered: %s", uid, reason)
            return
        if not await believed(message, raw, domain_of(mail.sender), options.require_auth):
            log.warning(
                "email: UID %d not answered: the sender %s is not authenticated "
                "(require_auth: %s)", uid, mail.sender, options.require_auth,
            )  # fmt: skip
            return
        self._budget.forget_idle()
        if not self._budget.take(mail.sender):
            log.warning(
                "email: UID %d not answered: %s already had %d replies this hour "
                "(max_replies_per_hour)", uid, mail.sender, options.max_replies_per_hour,
            )  # fmt: skip
            return
        self._remember(mail)
        assert self._on_message is not None
        await self._on_message(self._inbound(mail))
        try:
            await session.mark_seen(uid)
            if options.processed_folder:
                await session.move(uid, options.processed_folder)
        except ImapError as exc:  # handed on already: a flag or a move is not worth a retry
            log.warning("email: UID %d was answered but not filed: %s", uid, exc)

    def _inbound(self, mail: MailIn) -> Inbound:
        chat = ChatRef(
            channel=self.name,
            account=self._address,
            kind="dm",
            chat_id=mail.sender,
            thread_id=mail.thread,
            reply_to=mail.message_id,
        )
        return Inbound(
            chat=chat,
            sender_id=mail.sender,
            text=mail.text,
            message_id=mail.message_id,
            sender_name=mail.sender_name,
            images=mail.images,
            attachments=mail.attachments,
        )

    def _remember(self, mail: MailIn) -> None:
        reply = ReplyTo(mail.sender, mail.subject, mail.message_id, mail.references)
        self._replies[mail.message_id] = reply
        self._replies[_thread_key(mail.sender, mail.thread)] = reply
        while len(self._replies) > _REMEMBERED:
            self._replies.popitem(last=False)

    # -- one mail out --

    def _reply_for(self, chat: ChatRef) -> ReplyTo:
        for key in (chat.reply_to, _thread_key(chat.chat_id, chat.thread_id)):
            found = self._replies.get(key or "")
            if found is not None and found.to == chat.chat_id:
                return found
        thread = chat.thread_id or ""
        return ReplyTo(chat.chat_id, "", thread, (thread,) if thread else ())

    async def _send(self, chat: ChatRef, text: str, files: tuple[FileOut, ...]) -> None:
        reply = self._reply_for(chat)
        message = compose_reply(self._address, self._options.display_name, reply, text, files)
        for attempt in range(1, _SEND_ATTEMPTS + 1):
            try:
                await send_mail(self._options.smtp, self._smtp_user, message)
                return
            except SmtpError as exc:
                if attempt == _SEND_ATTEMPTS:
                    raise
                log.warning("email: sending to %s failed (%s); retrying", reply.to, exc)
                await asyncio.sleep(attempt)

    def _set_status(self, up: bool, detail: str) -> None:
        self._status = ChannelStatus(self.name, up, detail)


def _thread_key(sender: str, thread: str | None) -> str:
    return f"thread:{sender}:{thread or ''}"
