"""Whether a mail's From address is believed: `require_auth` dmarc | dkim | none.

`dmarc`: the receiving server's verdict in `Authentication-Results` (RFC 8601). Only the
topmost such header counts (the one our own server added; those below it came with the mail
and anyone could have written them). A sender is believed on `dmarc=pass`, or on
`dkim=pass` whose signing domain (`header.d`) is the From domain or a parent of it.
`dkim`: the same, and when the server wrote no verdict, the mail's own DKIM signature is
checked with dkimpy (its DNS lookup runs in a thread), again aligned with the From domain.
`none`: the From line is believed (a private server you trust).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from email.message import Message
from typing import Literal

log = logging.getLogger(__name__)

RequireAuth = Literal["dmarc", "dkim", "none"]
DnsLookup = Callable[..., bytes | None]
_RESULT = re.compile(r"\b(dmarc|dkim)\s*=\s*([a-z]+)([^;]*)", re.IGNORECASE)
_HEADER_D = re.compile(r"\bheader\.d\s*=\s*([^\s;]+)", re.IGNORECASE)


def aligned(signer: str, from_domain: str) -> bool:
    """Relaxed alignment: the signing domain is the From domain or a parent of it."""
    signer, from_domain = signer.lower().strip("."), from_domain.lower().strip(".")
    return bool(signer) and (from_domain == signer or from_domain.endswith("." + signer))


def server_verdict(message: Message, from_domain: str) -> bool | None:
    """True/False from the topmost `Authentication-Results` (see the module docstring);
    None when there is none, or it says nothing of dmarc or dkim."""
    headers = message.get_all("Authentication-Results") or []
    if not headers:
        return None
    top = " ".join(str(headers[0]).split())
    results = _RESULT.findall(top)
    if not results:
        return None
    for method, result, props in results:
        if result.lower() != "pass":
            continue
        if method.lower() == "dmarc":
            return True
        signer = _HEADER_D.search(props)
        if signer is not None and aligned(signer.group(1), from_domain):
            return True
    return False


def dkim_signature_ok(raw: bytes, from_domain: str, dns: DnsLookup | None = None) -> bool:
    """The mail's own DKIM signature verifies and its `d=` aligns with the From domain."""
    import dkim

    try:
        verifier = dkim.DKIM(raw)
        ok = verifier.verify(dnsfunc=dns) if dns is not None else verifier.verify()
    except Exception as exc:  # dkimpy raises many kinds for malformed input
        log.info("email: DKIM check failed (%s)", type(exc).__name__)
        return False
    signer = (verifier.domain or b"").decode("ascii", "replace")
    return bool(ok) and aligned(signer, from_domain)


async def believed(
    message: Message,
    raw: bytes,
    from_domain: str,
    require: RequireAuth,
    dns: DnsLookup | None = None,
) -> bool:
    """Whether the From address is believed under `require` (see the module docstring)."""
    if require == "none":
        return True
    verdict = server_verdict(message, from_domain)
    if verdict is not None or require == "dmarc":
        return bool(verdict)
    return await asyncio.to_thread(dkim_signature_ok, raw, from_domain, dns)
