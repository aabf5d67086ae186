"""Which mail Perch must never answer, and how often it may answer one sender. Pure.

`why_not_answer(message, own_address)` names the first reason a mail is not for a reply, or
returns None: `Auto-Submitted` other than `no` (RFC 3834: auto-replies, vacation notices,
Perch's own answers), `Precedence: bulk | list | junk`, any `List-*` header (RFC 2369/2919
mailing lists), bounces (the null return path `<>`, `MAILER-DAEMON`/`postmaster` senders,
delivery reports), auto-responders that say so in their own headers (`X-Autoreply`,
`X-Autorespond`, Microsoft's `X-Auto-Response-Suppress: All`/`OOF`), and mail from Perch's
own address. `ReplyBudget` allows at most N replies per sender in any hour (a sliding window).
"""

from __future__ import annotations

import time
from collections import deque
from email.message import Message

from channels.email.headers import return_path, sender

_BULK_PRECEDENCE = frozenset({"bulk", "list", "junk"})
_LIST_HEADERS = (
    "List-Id",
    "List-Unsubscribe",
    "List-Post",
    "List-Help",
    "List-Owner",
    "List-Subscribe",
    "List-Archive",
)
_ROBOT_LOCALS = frozenset({"mailer-daemon", "postmaster", "noreply", "no-reply", "do-not-reply"})
_AUTORESPONDER_HEADERS = ("X-Autoreply", "X-Autorespond", "X-Autoresponder")
_REPORT_TYPES = ("multipart/report",)


def why_not_answer(message: Message, own_address: str) -> str | None:
    """The reason this mail gets no reply (see the module docstring), or None."""
    if message.get("Auto-Submitted") is not None:
        auto = str(message["Auto-Submitted"]).split(";")[0].strip().lower()
        if auto != "no":  # an empty or unknown value is a robot's too
            return f"Auto-Submitted: {auto or '(empty)'}"
    precedence = str(message.get("Precedence", "")).strip().lower()
    if precedence in _BULK_PRECEDENCE:
        return f"Precedence: {precedence}"
    for name in _LIST_HEADERS:
        if message.get(name) is not None:
            return f"mailing list ({name})"
    if return_path(message) == "":
        return "bounce (null return path)"
    for name in _AUTORESPONDER_HEADERS:
        if message.get(name) is not None:
            return f"auto-responder ({name})"
    suppress = str(message.get("X-Auto-Response-Suppress", "")).lower()
    if any(word in suppress for word in ("all", "oof", "autoreply")):
        return "auto-responder (X-Auto-Response-Suppress)"
    if message.get_content_type() in _REPORT_TYPES:
        return "delivery or read report"
    address, _ = sender(message)
    if not address:
        return "no single usable From address"
    if address.partition("@")[0] in _ROBOT_LOCALS:
        return f"robot sender {address}"
    if address == own_address.lower():
        return "sent by Perch's own address"
    return None


class ReplyBudget:
    """At most `per_hour` mails let through per sender in any 3600 s (a sliding window)."""

    WINDOW = 3600.0

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._times: dict[str, deque[float]] = {}

    def take(self, sender_id: str, now: float | None = None) -> bool:
        """True, and counted, if this sender may have one more reply now."""
        now = time.time() if now is None else now
        times = self._times.setdefault(sender_id, deque())
        while times and times[0] <= now - self.WINDOW:
            times.popleft()
        if len(times) >= self.per_hour:
            return False
        times.append(now)
        return True

    def forget_idle(self, now: float | None = None) -> None:
        """Drop senders with nothing in the window (keeps memory bounded)."""
        now = time.time() if now is None else now
        for key in [k for k, t in self._times.items() if not t or t[-1] <= now - self.WINDOW]:
            del self._times[key]
