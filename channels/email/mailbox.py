"""Watching the mailbox: new mail found by UID after a cursor kept across restarts.

`MailboxWatcher.run()` logs in, opens the folder, and hands every mail after the cursor to
`take(session, uid)` in UID order, saving the cursor (`<UIDVALIDITY>:<UID>`, in the
channel's state) after each one, so mail that came while Perch was down is taken once when
it starts. Then it waits: IMAP IDLE when the server offers it and `imap.idle` is on (a push
arrives within a second of a delivery), else a poll every `poll_s`. A lost connection is
reopened with back-off. `busy` is held while one mail is handed on and the cursor saved, so
stopping between mails never hands one on twice. With no cursor yet (first start), or when the folder's UIDVALIDITY
changed (the server renumbered it), it starts after the newest mail: old mail is left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels.email.errors import one_line
from channels.email.imap import ImapSession, open_session
from channels.email.options import EmailOptions
from channels.reconnect import Backoff
from channels.state import ChannelState

log = logging.getLogger(__name__)

Take = Callable[[ImapSession, int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Cursor:
    uidvalidity: int
    uid: int

    def __str__(self) -> str:
        return f"{self.uidvalidity}:{self.uid}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        validity, _, uid = (text or "").partition(":")
        if not (validity.isdigit() and uid.isdigit()):
            return None
        return cls(int(validity), int(uid))


class MailboxWatcher:
    """See the module docstring; `status` is told of each connect and failure."""

    def __init__(
        self,
        options: EmailOptions,
        state: ChannelState,
        take: Take,
        on_status: Callable[[bool, str], None],
    ) -> None:
        self._options = options
        self._imap = options.imap
        self._username = options.imap.username or options.address
        self._state = state
        self._take = take
        self._on_status = on_status
        self._key = f"imap:{self._username}@{self._imap.host}/{self._imap.folder}"
        self.attempted = asyncio.Event()
        self.busy = asyncio.Lock()  # held while one mail is taken and the cursor moved past it

    async def run(self) -> None:
        backoff = Backoff(self._options.reconnect_initial, self._options.reconnect_max)
        while True:
            try:
                session = await open_session(self._imap, self._username)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.failed()
                self._on_status(
                    False, f"IMAP {self._imap.host}: {one_line(exc)}; retry in {delay:.0f} s"
                )
                log.warning(
                    "email: IMAP %s: %s; retrying in %.0f s", self._imap.host, one_line(exc), delay
                )
                self.attempted.set()
                await asyncio.sleep(delay)
                continue
            try:
                await self._watch(session, backoff)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.failed()
                self._on_status(
                    False, f"IMAP connection lost: {one_line(exc)}; retry in {delay:.0f} s"
                )
                log.warning(
                    "email: IMAP connection lost (%s); reconnecting in %.0f s", one_line(exc), delay
                )
                self.attempted.set()
                await asyncio.sleep(delay)
            finally:
                await session.close()

    async def _watch(self, session: ImapSession, backoff: Backoff) -> None:
        folder = await session.select(self._imap.folder)
        cursor = Cursor.parse(await self._state.load(self._key))
        if cursor is None or cursor.uidvalidity != folder.uidvalidity:
            newest = max(await session.uids_after(0), default=0)
            start = max(newest, folder.uidnext - 1, 0) if folder.uidnext else newest
            if cursor is not None:
                log.warning(
                    "email: %s was renumbered (UIDVALIDITY %d, was %d); starting after UID %d",
                    self._imap.folder, folder.uidvalidity, cursor.uidvalidity, start,
                )  # fmt: skip
            else:
                log.info(
                    "email: first start on %s; mail before UID %d left alone",
                    self._imap.folder,
                    start + 1,
                )
            cursor = Cursor(folder.uidvalidity, start)
            await self._state.save(self._key, str(cursor))
        idle = self._imap.idle and session.has("IDLE")
        self._on_status(
            True,
            f"{self._options.address} ({'IDLE' if idle else f'polling every {self._imap.poll_s:g} s'})",
        )
        backoff.reset()
        self.attempted.set()
        while True:
            uids = await session.uids_after(cursor.uid)
            for uid in uids:
                async with self.busy:  # `stop` waits for a mail being taken
                    await self._take(session, uid)
                    cursor = Cursor(cursor.uidvalidity, uid)
                    await self._state.save(self._key, str(cursor))
            if uids:
                # Mail announced in the answer to a FETCH or STORE would not be announced
                # again in IDLE: wait only once a search right before it found nothing new.
                continue
            if idle:
                await session.wait_for_news(self._imap.idle_renew_s)
            else:
                await asyncio.sleep(self._imap.poll_s)
                await session.noop()
