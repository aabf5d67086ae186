"""The email channel's settings (`channels.email` in config.yaml), checked when it loads.

Owns `EmailOptions` with its `imap:` and `smtp:` servers. `tls` is `ssl` (implicit TLS),
`starttls` or `none`; certificates are always checked, and `none` is refused for any host but
127.0.0.1 (a mail password never crosses a network in clear). `allow_from` holds addresses
and `@domain` entries; addresses are compared without regard to case.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from channels.options import ChannelPolicy, Secret

Tls = Literal["ssl", "starttls", "none"]
LOOPBACK = "127.0.0.1"


class MailServer(BaseModel):
    """One server Perch logs in to: where, how it is encrypted, and as whom."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = ""
    port: int = Field(0, ge=0, le=65535)  # 0: the usual port for `tls`
    tls: Tls = "ssl"
    username: str = ""  # empty: the channel's address
    password: Secret = ""
    timeout_s: float = Field(30.0, gt=0)


class ImapOptions(MailServer):
    """The mailbox Perch reads: `folder` is watched with IDLE when the server offers it (and
    `idle` is true), else polled every `poll_s` seconds."""

    folder: str = "INBOX"
    idle: bool = True
    poll_s: float = Field(60.0, gt=0)
    idle_renew_s: float = Field(25 * 60.0, gt=0)  # RFC 2177: re-issue IDLE within 29 minutes

    def real_port(self) -> int:
        return self.port or (993 if self.tls == "ssl" else 143)


class SmtpOptions(MailServer):
    """The server Perch sends its replies through."""

    def real_port(self) -> int:
        return self.port or {"ssl": 465, "starttls": 587, "none": 25}[self.tls]


class EmailOptions(ChannelPolicy):
    """Configuration of the email channel (`channels.email` in config.yaml).

    `require_auth` decides whether a sender's address is believed: `dmarc` reads the
    receiving server's `Authentication-Results`, `dkim` also checks the message's own DKIM
    signature when the server wrote no verdict, `none` believes the From line (only for a
    private server you trust). `max_replies_per_hour` bounds what one sender can make Perch
    write; `processed_folder` (if set) is where handled mail is moved.
    """

    address: str = ""
    display_name: str = "Perch"
    imap: ImapOptions = Field(default_factory=ImapOptions)
    smtp: SmtpOptions = Field(default_factory=SmtpOptions)
    require_auth: Literal["dmarc", "dkim", "none"] = "dmarc"
    processed_folder: str = ""
    max_replies_per_hour: int = Field(10, ge=1)
    max_text_chars: int = Field(100_000, ge=1_000)  # of one mail's text, after trimming
    streaming: Literal["off", "partial"] = "off"  # one mail per reply, always
    reconnect_initial: float = Field(1.0, gt=0)
    reconnect_max: float = Field(300.0, gt=0)

    def owner_ids(self) -> tuple[str, ...]:
        return tuple(i.lower() for i in self.allow_from if i != "*" and not i.startswith("@"))

    def allows(self, sender_id: str) -> bool:
        """An address (case aside), or any address of an `@domain` entry's domain."""
        sender = sender_id.lower()
        domain = "@" + sender.rpartition("@")[2]
        return any(entry.lower() in (sender, domain) for entry in self.allow_from)

    @model_validator(mode="after")
    def _usable(self) -> EmailOptions:
        if not self.enabled:
            return self
        if "@" not in self.address:
            raise ValueError(
                "channels.email.address must be the mailbox Perch answers, e.g. perch@example.com"
            )
        for name, server in (("imap", self.imap), ("smtp", self.smtp)):
            if not server.host:
                raise ValueError(f"channels.email.{name}.host is empty: set the {name} server")
            if server.tls == "none" and server.host != LOOPBACK:
                raise ValueError(
                    f"channels.email.{name}.tls is none but the host is {server.host}: mail "
                    f"passwords travel in clear only to {LOOPBACK}; use ssl or starttls"
                )
            if not server.password:
                raise ValueError(
                    f"channels.email.{name}.password is empty: set the mailbox's (app) password"
                )
        return self
