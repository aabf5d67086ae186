"""What a webhook must pass and what it becomes: signatures, the message template, the rate.

Pure, table- and property-tested (tests/hub/test_hook_checks.py):
- `check_signature`: `github` is `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw
  body>`; `perch` is `X-Perch-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`
  with `X-Perch-Timestamp` (Unix seconds) within `WINDOW` of now, so a captured request can
  neither be sent again later nor given a fresh timestamp. Digests are compared with
  `hmac.compare_digest`. The answer is None (good) or why not (401).
- `render_message`: `{body}`, `{name}`, `{json.a.b.0}` (a field of a JSON body; objects
  shown as JSON) and `{headers.X-Name}`; a placeholder that finds nothing becomes empty, any
  other text stays as written; the result is cut to `max_chars` with a marker.
- `RateWindow`: at most `per_minute` calls in any 60 seconds, per endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Literal

WINDOW = 300.0  # seconds a perch-signed request's timestamp may differ from now
CUT_MARK = "\n[... cut]"
PLACEHOLDER = re.compile(r"\{(body|name|json(?:\.[^{}\s]+)*|headers\.[A-Za-z0-9_-]+)\}")

Scheme = Literal["github", "perch"]


def sign(secret: str, body: bytes, timestamp: str | None = None) -> str:
    """The signature header's value for `body` (and `timestamp`, the perch scheme)."""
    signed = body if timestamp is None else timestamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def _matches(secret: str, given: str, body: bytes, timestamp: str | None = None) -> bool:
    expected = sign(secret, body, timestamp)
    return hmac.compare_digest(expected.encode(), given.strip().encode("utf-8", "replace"))


def check_signature(
    scheme: Scheme, secret: str, headers: Mapping[str, str], body: bytes, now: float
) -> str | None:
    """None when the request is signed with `secret` as `scheme` says; else why not."""
    if scheme == "github":
        given = headers.get("X-Hub-Signature-256", "")
        if not given:
            return "missing X-Hub-Signature-256"
        return None if _matches(secret, given, body) else "wrong signature"
    given = headers.get("X-Perch-Signature", "")
    stamp = headers.get("X-Perch-Timestamp", "")
    if not given or not stamp:
        return "missing X-Perch-Signature or X-Perch-Timestamp"
    if not _matches(secret, given, body, stamp):
        return "wrong signature"
    try:
        when = float(stamp)
    except ValueError:
        return "X-Perch-Timestamp is not a number of seconds"
    if not abs(now - when) <= WINDOW:
        return "X-Perch-Timestamp is more than 5 minutes away from now"
    return None


def _field(data: object, path: list[str]) -> object:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _shown(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def render_message(
    template: str,
    *,
    name: str,
    body: bytes,
    headers: Mapping[str, str],
    max_chars: int,
) -> str:
    """The turn's message for a webhook call (see the module's docstring)."""
    text = body.decode("utf-8", "replace")
    parsed: object = None
    if "{json" in template:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None

    def fill(match: re.Match[str]) -> str:
        word = match.group(1)
        if word == "body":
            return text
        if word == "name":
            return name
        if word.startswith("headers."):
            return headers.get(word.removeprefix("headers."), "")
        return _shown(_field(parsed, word.split(".")[1:]))

    message = PLACEHOLDER.sub(fill, template)
    if len(message) > max_chars:
        message = message[: max_chars - len(CUT_MARK)] + CUT_MARK
    return message


class RateWindow:
    """At most `per_minute` calls in any 60 s: `admit()` is True and counts the call, or
    False (429) and counts nothing."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._calls: deque[float] = deque()

    def admit(self) -> bool:
        now = self.clock()
        while self._calls and now - self._calls[0] >= 60.0:
            self._calls.popleft()
        if len(self._calls) >= self.per_minute:
            return False
        self._calls.append(now)
        return True

    def retry_after(self) -> int:
        """Whole seconds until the oldest counted call leaves the window."""
        if not self._calls:
            return 1
        return max(1, int(60.0 - (self.clock() - self._calls[0]) + 0.999))
