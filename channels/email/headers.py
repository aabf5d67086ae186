"""What a mail's headers say about where it belongs: sender, thread, subject. Pure.

A thread is told by its root: the first id in `References`, else `In-Reply-To`, else the
mail's own `Message-ID` (RFC 5322 section 3.6.4; clients keep the root first when they trim
`References`). Ids are kept without their angle brackets; a mail with no `Message-ID` gets
one made from a digest of its bytes, so the same mail always gets the same id.
"""

from __future__ import annotations

import hashlib
import re
from email.headerregistry import Address
from email.message import Message
from email.utils import getaddresses, parseaddr

_MESSAGE_ID = re.compile(r"<([^<>\s]+)>")
_REPLY_PREFIX = re.compile(r"^\s*((re|aw|sv|vs|antw|odp|r)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
MAX_REFERENCES = 20  # the root and the most recent ids: enough for every client to thread


def message_ids(value: str | None) -> list[str]:
    """The `<id>` tokens of a `Message-ID`, `In-Reply-To` or `References` value, in order,
    without brackets; a bare id with no brackets counts when it is the whole value."""
    if not value:
        return []
    found = _MESSAGE_ID.findall(str(value))
    if found:
        return found
    bare = str(value).strip()
    plain = "@" in bare and not any(c.isspace() or c in "<>" for c in bare)
    return [bare] if plain else []


def own_id(message: Message, raw: bytes) -> str:
    """The mail's `Message-ID` (no brackets), or a stable one made from its bytes."""
    ids = message_ids(message.get("Message-ID"))
    if ids:
        return ids[0]
    return hashlib.sha256(raw).hexdigest()[:32] + "@perch.invalid"


def thread_root(message: Message, raw: bytes) -> str:
    """The id of the first mail of the thread this mail belongs to."""
    references = message_ids(message.get("References"))
    if references:
        return references[0]
    parent = message_ids(message.get("In-Reply-To"))
    return parent[0] if parent else own_id(message, raw)


def references_for_reply(message: Message, raw: bytes) -> list[str]:
    """The `References` of a reply to this mail: its own, then its id; the root and the last
    ones kept when there are too many."""
    chain = message_ids(message.get("References"))
    if not chain:
        chain = message_ids(message.get("In-Reply-To"))
    own = own_id(message, raw)
    chain = [*dict.fromkeys(ref for ref in chain if ref != own), own]
    if len(chain) > MAX_REFERENCES:
        chain = [chain[0], *chain[-(MAX_REFERENCES - 1) :]]
    return chain


def reply_subject(subject: str | None) -> str:
    """`Re: <subject>` with any stack of reply prefixes (Re:, AW:, SV: ...) folded into one."""
    text = " ".join(str(subject or "").split())
    rest = _REPLY_PREFIX.sub("", text)
    return f"Re: {rest}" if rest else "Re: your message"


def sender(message: Message) -> tuple[str, str]:
    """(address in lower case, display name) of `From`; ("", "") if there is no usable one.

    A `From` with more than one address has no single sender and is refused too.
    """
    values = message.get_all("From") or []
    pairs = getaddresses([str(v) for v in values])
    pairs = [(name, addr) for name, addr in pairs if addr]
    if len(pairs) != 1:
        return "", ""
    name, address = pairs[0]
    address = address.strip().lower()
    if not is_address(address):
        return "", ""
    return address, " ".join(name.split())


def return_path(message: Message) -> str | None:
    """The envelope sender the delivering server recorded (`Return-Path`), "" for the null
    sender `<>` of bounces, None when there is no such header."""
    value = message.get("Return-Path")
    if value is None:
        return None
    return parseaddr(str(value))[1].strip().lower()


def is_address(value: str) -> bool:
    """A plain `local@domain` with no spaces, brackets or further @ (what we answer to)."""
    local, at, domain = value.rpartition("@")
    if not at or not local or "." not in domain.strip("."):
        return False
    return not any(c.isspace() or c in '<>()[],;:\\"' for c in value) and "@" not in local


def domain_of(address: str) -> str:
    return address.rpartition("@")[2].lower()


def formatted_address(address: str, display_name: str) -> str:
    """`Display Name <address>`, quoted as RFC 5322 wants."""
    local, _, domain = address.rpartition("@")
    return str(Address(display_name=display_name, username=local, domain=domain))
