"""Who may use the dashboard: the token, the session cookie made from it, each session's CSRF
token, the limit on failed attempts, and the same-origin test for changes.

Pure and clock-injected, so a table of cases tests them. A session cookie is
`<issued>.<nonce>.<mac>` with the MAC an HMAC-SHA256 under the token, and its nonce must also
be one of the live sessions this server keeps (at most `MAX_SESSIONS`, the oldest dropped):
logging out ends the session on the server, so a copy of the cookie is worth nothing after;
a restart or a new token logs every browser out, and a cookie lives `SESSION_DAYS` at most.
The CSRF token of a session is another HMAC of its nonce. Every comparison is constant-time.

`FailureLimit` counts wrong tokens per client address (5 a minute) and over all addresses
together (`MAX_GLOBAL_FAILURES` a minute), so many source addresses (all of 127.0.0.0/8 is
loopback) guess no faster than one. The limit only ever refuses a wrong token: the guard
checks the token first, so the right one gets in during a lockout, and a guesser cannot lock
the owner out. (What makes guessing hopeless is the token itself: 16 characters or more.)
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
MAX_GLOBAL_FAILURES = 20  # failed logins from all addresses together in FAILURE_WINDOW
MAX_SESSIONS = 256  # live browser sessions kept (the oldest logged out first)

Clock = Callable[[], float]


class Credentials:
    """The dashboard's token and what is derived from it."""

    def __init__(self, token: str, clock: Clock = time.time) -> None:
        self._key = token.encode("utf-8")
        self._clock = clock
        self._live: OrderedDict[str, None] = OrderedDict()  # the nonces of live sessions

    def token_ok(self, given: str) -> bool:
        """`given` is the token (compared in constant time)."""
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._key)

    def new_session(self) -> str:
        """A fresh session cookie value."""
        issued, nonce = str(int(self._clock())), secrets.token_urlsafe(18)
        self._live[nonce] = None
        while len(self._live) > MAX_SESSIONS:
            self._live.popitem(last=False)
        return f"{issued}.{nonce}.{self._mac('session', issued, nonce)}"

    def end_session(self, session_id: str) -> None:
        """Log session `session_id` out: its cookie is refused from now on."""
        self._live.pop(session_id, None)

    def session_id(self, cookie: str) -> str | None:
        """The session's id (its nonce) if `cookie` is one of ours and not expired."""
        issued, _, rest = cookie.partition(".")
        nonce, _, mac = rest.partition(".")
        if not issued.isdigit() or not nonce or not mac:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac("session", issued, nonce).encode()):
            return None
        age = self._clock() - int(issued)
        if not -60 <= age <= SESSION_SECONDS or nonce not in self._live:
            self._live.pop(nonce, None)
            return None
        return nonce

    def csrf(self, session_id: str) -> str:
        """The CSRF token every form of this session carries."""
        return self._mac("csrf", session_id)

    def csrf_ok(self, session_id: str, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.csrf(session_id).encode())

    def _mac(self, *parts: str) -> str:
        return hmac.new(self._key, "\n".join(parts).encode(), hashlib.sha256).hexdigest()


class FailureLimit:
    """At most `limit` failed attempts per client address, and `overall` from all addresses
    together, in `window` seconds. It refuses wrong tokens only (see the module's note)."""

    def __init__(
        self,
        limit: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW,
        clock: Clock = time.monotonic,
        overall: int = MAX_GLOBAL_FAILURES,
    ) -> None:
        self.limit = limit
        self.overall = overall
        self.window = window
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque()

    def retry_after(self, address: str) -> float:
        """Seconds until a wrong token from `address` stops being refused; 0 when it is not."""
        waits = [
            self._wait(self._recent(address), self.limit),
            self._wait(self._every(), self.overall),
        ]
        return max(waits)

    def _wait(self, failures: deque[float], limit: int) -> float:
        if len(failures) < limit:
            return 0.0
        return max(failures[0] + self.window - self._clock(), 0.001)

    def _every(self) -> deque[float]:
        cutoff = self._clock() - self.window
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        return self._all

    def failed(self, address: str) -> None:
        self._every().append(self._clock())
        while len(self._all) > self.overall:  # only the newest `overall` matter
            self._all.popleft()
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
