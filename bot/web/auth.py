"""Who may use the dashboard: the token, the session cookie made from it, each session's CSRF
token, the limit on failed attempts, and the same-origin test for changes.

Pure and clock-injected, so a table of cases tests them. A session cookie is
`<issued>.<nonce>.<mac>` with the MAC an HMAC-SHA256 under the token: nothing is kept on the
server, changing the token logs every browser out, and a cookie lives `SESSION_DAYS`. The CSRF
token of a session is another HMAC of its nonce. Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from urllib.parse import urlsplit

SESSION_DAYS = 7
SESSION_SECONDS = SESSION_DAYS * 86400
MAX_FAILURES = 5  # failed logins per client address ...
FAILURE_WINDOW = 60.0  # ... in this many seconds; then 429 until the oldest ages out
MAX_ADDRESSES = 4096  # addresses remembered (the oldest forgotten first)

Clock = Callable[[], float]


class Credentials:
    """The dashboard's token and what is derived from it."""

    def __init__(self, token: str, clock: Clock = time.time) -> None:
        self._key = token.encode("utf-8")
        self._clock = clock

    def token_ok(self, given: str) -> bool:
        """`given` is the token (compared in constant time)."""
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._key)

    def new_session(self) -> str:
        """A fresh session cookie value."""
        issued, nonce = str(int(self._clock())), secrets.token_urlsafe(18)
        return f"{issued}.{nonce}.{self._mac('session', issued, nonce)}"

    def session_id(self, cookie: str) -> str | None:
        """The session's id (its nonce) if `cookie` is one of ours and not expired."""
        issued, _, rest = cookie.partition(".")
        nonce, _, mac = rest.partition(".")
        if not issued.isdigit() or not nonce or not mac:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac("session", issued, nonce).encode()):
            return None
        age = self._clock() - int(issued)
        return nonce if -60 <= age <= SESSION_SECONDS else None

    def csrf(self, session_id: str) -> str:
        """The CSRF token every form of this session carries."""
        return self._mac("csrf", session_id)

    def csrf_ok(self, session_id: str, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.csrf(session_id).encode())

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._key, "\n".join(parts).encode(), hashlib.sha256).hexdigest()


class FailureLimit:
    """At most `MAX_FAILURES` failed attempts per client address in `FAILURE_WINDOW`."""

    def __init__(
        self,
        limit: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW,
        clock: Clock = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> float:
        """Seconds until `address` may try again; 0 when it may now."""
        failures = self._recent(address)
        if len(failures) < self.limit:
            return 0.0
        return max(failures[0] + self.window - self._clock(), 0.001)

    def failed(self, address: str) -> None:
        failures = self._recent(address)
        failures.append(self._clock())
        self._failures[address] = failures
        self._failures.move_to_end(address)
        while len(self._failures) > MAX_ADDRESSES:
            self._failures.popitem(last=False)

    def _recent(self, address: str) -> deque[float]:
        failures = self._failures.get(address, deque())
        cutoff = self._clock() - self.window
        while failures and failures[0] <= cutoff:
            failures.popleft()
        if not failures:
            self._failures.pop(address, None)
        return failures


def same_origin(origin: str, referer: str, host: str) -> bool:
    """A change may come only from the dashboard's own pages: the `Origin` header (else the
    `Referer`) names the host:port the request was sent to. Neither, or `null`, is refused."""
    source = origin.strip() or referer.strip()
    if not source or source == "null" or not host:
        return False
    parts = urlsplit(source)
    if parts.scheme not in ("http", "https"):
        return False
    return parts.netloc.lower() == host.strip().lower()


def safe_next(path: str) -> str:
    """Where to go after logging in: a path on this site only (never `//elsewhere`)."""
    if not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path
