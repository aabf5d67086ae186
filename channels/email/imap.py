"""The IMAP side: one logged-in session on the watched folder, over aioimaplib.

aioimaplib is used because it is asyncio-native, has IDLE, and is maintained (2.0, 2026);
the other asyncio IMAP clients on PyPI are abandoned forks. It has no STARTTLS command of its
own, so `open_session` issues STARTTLS and upgrades the transport with asyncio's `start_tls`
(the certificate is checked against the host name either way). `ImapSession` offers what the
adapter needs: the folder's UIDVALIDITY and next UID, UIDs after a cursor, a mail's bytes
(`BODY.PEEK[]`, so fetching does not mark it read), `\\Seen`, a move (MOVE, or COPY +
`\\Deleted` + UID EXPUNGE), and one IDLE wait that returns on a push or after `renew_s`.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import aioimaplib

from channels.email.options import ImapOptions

T = TypeVar("T")
_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT = re.compile(rb"\[UIDNEXT (\d+)\]")


class ImapError(Exception):
    """The IMAP server refused something, or did not answer; the message says what."""


@dataclass(frozen=True, slots=True)
class Folder:
    uidvalidity: int
    uidnext: int


def tls_context() -> ssl.SSLContext:
    """Certificates checked against the system's trust store (and SSL_CERT_FILE)."""
    return ssl.create_default_context(ssl.Purpose.SERVER_AUTH)


async def open_session(options: ImapOptions, username: str) -> ImapSession:
    """Connected, encrypted as configured, and logged in; `ImapError` if any step fails."""
    host, port, timeout = options.host, options.real_port(), options.timeout_s
    lost = asyncio.Event()
    loop = asyncio.get_running_loop()
    client = aioimaplib.IMAP4(
        host,
        port,
        timeout=timeout,
        conn_lost_cb=lambda exc: loop.call_soon_threadsafe(lost.set),
        ssl_context=tls_context() if options.tls == "ssl" else None,
    )
    session = ImapSession(client, timeout, lost)
    try:
        await client.wait_hello_from_server()
        if options.tls == "starttls":
            await session.starttls(host)
        response = await client.login(username, options.password)
        if response.result != "OK":
            raise ImapError(f"login as {username} refused: {_said(response)}")
    except BaseException:
        await session.close()
        raise
    return session


class ImapSession:
    """One logged-in connection (see the module docstring)."""

    def __init__(self, client: aioimaplib.IMAP4, timeout: float, lost: asyncio.Event) -> None:
        self.client = client
        self.timeout = timeout
        self.lost = lost  # set when the server closes the connection (BYE, a restart)

    def has(self, capability: str) -> bool:
        return self.client.has_capability(capability)

    async def starttls(self, host: str) -> None:
        protocol = self.client.protocol
        if not self.has("STARTTLS"):
            raise ImapError("the server offers no STARTTLS; use tls: ssl (port 993)")
        command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
        response = await asyncio.wait_for(protocol.execute(command), self.timeout)
        if response.result != "OK":
            raise ImapError(f"STARTTLS refused: {_said(response)}")
        loop = asyncio.get_running_loop()
        transport = await loop.start_tls(
            protocol.transport, protocol, tls_context(), server_hostname=host
        )
        protocol.transport = transport
        protocol.capabilities = set()  # what was said in clear is not to be believed
        await asyncio.wait_for(protocol.capability(), self.timeout)

    async def select(self, folder: str) -> Folder:
        response = await self.call(self.client.select(folder))
        if response.result != "OK":
            raise ImapError(f"cannot open folder {folder!r}: {_said(response)}")
        joined = b"\n".join(bytes(line) for line in response.lines)
        validity, upcoming = _UIDVALIDITY.search(joined), _UIDNEXT.search(joined)
        if validity is None:
            raise ImapError(f"folder {folder!r} has no UIDVALIDITY")
        return Folder(int(validity.group(1)), int(upcoming.group(1)) if upcoming else 0)

    async def uids_after(self, uid: int) -> list[int]:
        """UIDs above `uid`, ascending (`n:*` also names the last mail when it is lower)."""
        response = await self.call(self.client.uid_search("UID", f"{uid + 1}:*"))
        return [u for u in _numbers(response) if u > uid]

    async def unseen(self) -> list[int]:
        return _numbers(await self.call(self.client.uid_search("UNSEEN")))

    async def fetch(self, uid: int) -> bytes | None:
        """The mail's bytes, or None if it is gone (expunged by another client)."""
        response = await self.call(self.client.uid("fetch", str(uid), "(UID BODY.PEEK[])"))
        if response.result != "OK":
            raise ImapError(f"fetching UID {uid} failed: {_said(response)}")
        for line in response.lines:
            if isinstance(line, bytearray):
                return bytes(line)
        return None

    async def mark_seen(self, uid: int) -> None:
        await self._ok(self.client.uid("store", str(uid), "+FLAGS", "(\\Seen)"), "flag")

    async def move(self, uid: int, folder: str) -> None:
        await self.call(self.client.create(folder))  # refused when it exists: fine
        if self.has("MOVE"):
            await self._ok(self.client.uid("move", str(uid), folder), f"move to {folder!r}")
            return
        await self._ok(self.client.uid("copy", str(uid), folder), f"copy to {folder!r}")
        await self._ok(self.client.uid("store", str(uid), "+FLAGS", "(\\Deleted)"), "delete")
        if self.has("UIDPLUS"):
            await self._ok(self.client.uid("expunge", str(uid)), "expunge")

    async def wait_for_news(self, renew_s: float) -> None:
        """Return when the server pushes a change to the folder, or after `renew_s` (IDLE)."""
        idle = await self.call(self.client.idle_start(timeout=renew_s))
        try:
            await self.call(self.client.wait_server_push(timeout=renew_s), renew_s + self.timeout)
        except BaseException:
            idle.cancel()
            raise
        if self.client.has_pending_idle():
            self.client.idle_done()
        await self.call(idle)

    async def call(self, work: Awaitable[T], within: float | None = None) -> T:
        """`work`'s result; `ImapError` at once if the server closes the connection, or
        when no answer came `within` seconds (the session's timeout by default)."""
        if self.lost.is_set():
            if asyncio.iscoroutine(work):
                work.close()  # never started
            raise ImapError("the server closed the connection")
        task = asyncio.ensure_future(work)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait(
                {task, lost}, timeout=within or self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
        if not task.done() or task.cancelled():
            closed = self.lost.is_set()
            raise ImapError("the server closed the connection" if closed else "no answer in time")
        return task.result()

    async def noop(self) -> None:
        await self._ok(self.client.noop(), "NOOP")

    async def close(self) -> None:
        try:
            if self.client.protocol is not None and self.client.get_state() != "LOGOUT":
                await asyncio.wait_for(self.client.logout(), 2.0)
        except Exception:  # closing a broken connection: nothing more to do
            pass
        transport = getattr(self.client.protocol, "transport", None)
        if transport is not None:
            transport.close()

    async def _ok(self, work: Awaitable[aioimaplib.Response], what: str) -> None:
        response = await self.call(work)
        if response.result != "OK":
            raise ImapError(f"{what} failed: {_said(response)}")


def _numbers(response: aioimaplib.Response) -> list[int]:
    if response.result != "OK" or not response.lines:
        raise ImapError(f"search failed: {_said(response)}")
    first = bytes(response.lines[0])
    return sorted(int(n) for n in first.split() if n.isdigit())


def _said(response: aioimaplib.Response) -> str:
    last = response.lines[-1] if response.lines else b""
    return bytes(last).decode("utf-8", "replace")[:200] or response.result
