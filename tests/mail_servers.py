"""Real mail servers for the email tests: Dovecot (IMAP, IDLE) and an aiosmtpd SMTP server.

`dovecot_server` (session-scoped) starts one Dovecot in the foreground on free loopback
ports with a throwaway config: plain IMAP (STARTTLS offered) and implicit TLS, both with a
self-signed certificate for 127.0.0.1, users in a passwd-file, Maildir under a temp dir
owned by `nobody` (Dovecot refuses to keep mail as root). `Dovecot.new_mailbox()` adds a
fresh user per test; `deliver` lands a mail with `dovecot-lda`, as a real MTA would. Where
Dovecot is not installed or cannot start, the tests that need it skip and say why.

`SmtpSink` is an aiosmtpd server on the test's own loop: it checks the login, keeps every
mail it accepts (to inspect what Perch sent) and delivers mail for Dovecot's users into
their mailboxes.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest

from tests.certificates import self_signed

LDA = Path("/usr/lib/dovecot/dovecot-lda")
DOMAIN = "example.test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Dovecot:
    root: Path
    imap_port: int
    imaps_port: int
    cert: Path
    key: Path
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "dovecot.conf"

    def new_mailbox(self, name: str = "bot") -> tuple[str, str]:
        """A fresh user `<name>-<random>@example.test`; (address, password)."""
        address = f"{name}-{secrets.token_hex(4)}@{DOMAIN}"
        password = secrets.token_urlsafe(12)
        self.passwords[address] = password
        # one passwd-file per user: Dovecot may not notice a file that grew within a second
        (self.root / "users" / address).write_text(f"{address}:{{PLAIN}}{password}::::::\n")
        return address, password

    def kick(self, user: str) -> None:
        """Close every IMAP session of `user` (what a server restart does to a client)."""
        argv = ["doveadm", "-c", str(self.conf), "kick", user]
        done = subprocess.run(argv, capture_output=True, timeout=20, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"doveadm kick failed: {done.stderr.decode(errors='replace')}")

    def deliver(self, to: str, raw: bytes, envelope_from: str = "") -> None:
        """Land `raw` in `to`'s INBOX through dovecot-lda, with the `Return-Path` an MTA
        writes at final delivery (`envelope_from` "" is a bounce's null sender `<>`)."""
        argv = [str(LDA), "-c", str(self.conf), "-d", to, "-f", envelope_from or "<>"]
        stamped = f"Return-Path: <{envelope_from}>\r\n".encode() + raw
        done = subprocess.run(argv, input=stamped, capture_output=True, timeout=20, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"dovecot-lda failed: {done.stderr.decode(errors='replace')}")


def _config(root: Path, imap_port: int, imaps_port: int, cert: Path, key: Path) -> str:
    return f"""
base_dir = {root}/run
state_dir = {root}/run/state
instance_name = perch-test-{imap_port}
protocols = imap
listen = 127.0.0.1
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = {root}/dovecot.log
default_login_user = nobody
default_internal_user = nobody
default_internal_group = nogroup
mail_location = maildir:{root}/mail/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users/%u
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/users/%u
  default_fields = uid=nobody gid=nogroup home={root}/mail/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
protocol lda {{
  postmaster_address = postmaster@{DOMAIN}
}}
"""


def _why_not() -> str | None:
    if shutil.which("dovecot") is None or not LDA.exists():
        return "Dovecot is not installed here (apt-get install dovecot-imapd; .ci/run does)"
    if os.geteuid() != 0:
        return "Dovecot for the tests needs root (it hands the mailboxes to nobody)"
    return None


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until Dovecot accepts on `port` (nothing announces it); at most 30 s."""
    for _ in range(600):
        try:
            process.wait(timeout=0.05)  # waits the 50 ms between attempts, or sees an exit
        except subprocess.TimeoutExpired:
            pass
        else:
            raise RuntimeError(f"dovecot exited: {log.read_text() if log.exists() else '?'}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            continue
    raise RuntimeError("dovecot did not listen within 30 s")


@pytest.fixture(scope="session")
def dovecot_server() -> Iterator[Dovecot | str]:
    """A running Dovecot, or the one-line reason there is none (for `pytest.skip`)."""
    reason = _why_not()
    if reason is not None:
        yield reason
        return
    root = Path(tempfile.mkdtemp(prefix="perch-dovecot-"))
    root.chmod(0o755)
    (root / "mail").mkdir()
    shutil.chown(root / "mail", "nobody", "nogroup")
    (root / "users").mkdir()
    cert, key = self_signed(root / "tls", "127.0.0.1")
    imap_port, imaps_port = _free_port(), _free_port()
    server = Dovecot(root, imap_port, imaps_port, cert, key)
    server.conf.write_text(_config(root, imap_port, imaps_port, cert, key))
    process = subprocess.Popen(
        ["dovecot", "-F", "-c", str(server.conf)],
        stdout=subprocess.DEVNULL,
        stderr=(root / "stderr.log").open("wb"),
    )
    try:
        try:
            _wait_listening(imap_port, process, root / "stderr.log")
        except RuntimeError as exc:
            yield f"Dovecot cannot start here: {' '.join(str(exc).split())[:200]}"
            return
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def dovecot(dovecot_server: Dovecot | str) -> Dovecot:
    if isinstance(dovecot_server, str):
        pytest.skip(dovecot_server)
    return dovecot_server


class _Sink:
    """aiosmtpd handler: keep, then deliver to Dovecot's users."""

    def __init__(self, dovecot: Dovecot, received: asyncio.Queue[EmailMessage]) -> None:
        self.dovecot = dovecot
        self.received = received
        self.kept: list[EmailMessage] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        raw = bytes(envelope.original_content or envelope.content)
        message = message_from_bytes(raw, policy=policy.default)
        assert isinstance(message, EmailMessage)
        for to in envelope.rcpt_tos:
            if to in self.dovecot.passwords:
                await asyncio.to_thread(self.dovecot.deliver, to, raw, envelope.mail_from)
        self.kept.append(message)
        self.received.put_nowait(message)
        return "250 OK"


@dataclass
class SmtpSink:
    port: int
    users: dict[str, str]
    handler: _Sink
    received: asyncio.Queue[EmailMessage]

    async def next(self, within: float = 20.0) -> EmailMessage:
        """The next mail the server accepted (fails the test after `within` s)."""
        return await asyncio.wait_for(self.received.get(), within)

    def nothing_more(self) -> bool:
        return self.received.empty()


@asynccontextmanager
async def smtp_server(dovecot: Dovecot, tls: str = "none") -> AsyncIterator[SmtpSink]:
    """An SMTP server on the test's loop: AUTH checked against Dovecot's users, each accepted
    mail kept and delivered to local mailboxes. `tls`: `none` (plain, for 127.0.0.1), `ssl`
    (implicit TLS) or `starttls` (required before AUTH), with Dovecot's certificate."""
    from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword

    def authenticate(
        server: Any, session: Any, envelope: Any, mechanism: str, data: Any
    ) -> AuthResult:
        ok = (
            isinstance(data, LoginPassword)
            and dovecot.passwords.get(data.login.decode()) == data.password.decode()
        )
        return AuthResult(success=ok, handled=False)  # aiosmtpd answers 535 itself

    received: asyncio.Queue[EmailMessage] = asyncio.Queue()
    handler = _Sink(dovecot, received)
    loop = asyncio.get_running_loop()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(dovecot.cert, dovecot.key)

    def serve() -> SMTP:
        with warnings.catch_warnings():  # AUTH without TLS: on purpose, on 127.0.0.1
            warnings.simplefilter("ignore", UserWarning)
            return SMTP(
                handler,
                hostname="smtp.example.test",
                authenticator=authenticate,
                auth_required=True,
                auth_require_tls=tls == "starttls",
                tls_context=context if tls == "starttls" else None,
                require_starttls=tls == "starttls",
            )

    server = await loop.create_server(serve, "127.0.0.1", 0, ssl=context if tls == "ssl" else None)
    port = server.sockets[0].getsockname()[1]
    try:
        yield SmtpSink(port, dovecot.passwords, handler, received)
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def smtp_sink(dovecot: Dovecot) -> AsyncIterator[SmtpSink]:
    """A plain `smtp_server` for the test."""
    async with smtp_server(dovecot) as sink:
        yield sink
