"""The silent-reply rules: NO_REPLY (`is_silent`, `strip_silent_token`, `SilentTokenFilter`
for streams) and HEARTBEAT_OK (`strip_heartbeat_ok`). Pure functions of text.

- NO_REPLY: a leading token may be wrapped in `*`, `_` or `~` (markdown emphasis) and is
  followed by a non-word character or the end; the separators after it (whitespace and
  `.,;:!?-|` and dashes) go with it. A trailing token must be preceded by a character that is
  neither a word character nor `*`/`~`; the whitespace before it goes with it. The side of
  the text without a token is returned untouched.
"""

from __future__ import annotations

import re

SILENT_TOKEN = "NO_REPLY"
HEARTBEAT_TOKEN = "HEARTBEAT_OK"

# ---------------------------------------------------------------------------------------------
# NO_REPLY.

_WRAP = r"[*_~]{0,3}"
_SILENT_START = re.compile(r"\s*" + _WRAP + SILENT_TOKEN + _WRAP + r"(?!\w)")
_SILENT_END = re.compile(r"(?<![\w*~])" + _WRAP + SILENT_TOKEN + _WRAP + r"\s*\Z")
_SILENT_SEPARATORS = frozenset(".,;:!?-|\u2013\u2014")


def _token_prefix(token: str, then: str) -> str:
    """A regex matching any prefix of `token`, and `then` once the token is complete."""
    pattern = then
    for char in reversed(token):
        pattern = f"(?:{re.escape(char)}{pattern})?"
    return pattern


# A stream start that may still turn into a leading token.
_SILENT_HEAD_VIABLE = re.compile(r"\s*" + _WRAP + _token_prefix(SILENT_TOKEN, _WRAP))
# A stream end that may still turn into a trailing token (after the lookbehind position).
_SILENT_TAIL_VIABLE = re.compile(_WRAP + _token_prefix(SILENT_TOKEN, _WRAP + r"\s*"))
_WORDISH = re.compile(r"[\w*~]")
_SILENT_TAIL_CORE = 3 + len(SILENT_TOKEN) + 3


def _is_separator(char: str) -> bool:
    return char.isspace() or char in _SILENT_SEPARATORS


def _skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and _is_separator(text[pos]):
        pos += 1
    return pos


def is_silent(text: str) -> bool:
    """True when the reply, trimmed, is exactly NO_REPLY: deliver nothing."""
    return text.strip() == SILENT_TOKEN


def strip_silent_token(text: str) -> str:
    """Remove a NO_REPLY standing at the very start or end; a mention mid-text stays.

    `"NO_REPLY"` -> `""`; `"NO_REPLY: done"` -> `"done"`; `"Done.\\n\\nNO_REPLY"` -> `"Done."`;
    `"Say NO_REPLY when idle"` is returned unchanged.
    """
    rest = text
    start = _SILENT_START.match(text)
    if start is not None:
        rest = text[_skip_separators(text, start.end()) :]
    end = _SILENT_END.search(rest)
    if end is not None:
        rest = rest[: end.start()].rstrip()
    return rest


class SilentTokenFilter:
    """Streams text while keeping a NO_REPLY at its start or end from ever being shown.

    `feed(delta)` returns what is safe to show now; `flush()` returns the rest once the
    stream ended. For every split of a text into deltas, the concatenation of all returned
    pieces equals `strip_silent_token(text)`. To keep that promise the filter holds back the
    stream's start while it may still be a NO_REPLY, and its tail while it may be whitespace
    followed by the beginning of one (e.g. `"... NO_RE"`), so a trailing token is never shown.
    """

    def __init__(self) -> None:
        self._phase = "head"  # head: may be a leading token; sep: after one; body
        self._held = ""
        self._last_shown = ""  # last character shown in the body (lookbehind context)

    def feed(self, delta: str) -> str:
        self._held += delta
        if self._phase == "head":
            if _SILENT_HEAD_VIABLE.fullmatch(self._held):
                return ""
            start = _SILENT_START.match(self._held)
            if start is None:
                self._phase = "body"
            else:
                self._phase, self._held = "sep", self._held[start.end() :]
        if self._phase == "sep":
            self._held = self._held[_skip_separators(self._held, 0) :]
            if not self._held:
                return ""
            self._phase = "body"
        cut = self._hold_from()
        shown, self._held = self._held[:cut], self._held[cut:]
        if shown:
            self._last_shown = shown[-1]
        return shown

    def flush(self) -> str:
        held, self._held = self._held, ""
        if self._phase == "head":
            return strip_silent_token(held)
        if self._phase == "sep":
            return ""
        context = self._last_shown
        end = _SILENT_END.search(context + held, len(context))
        if end is None:
            return held
        return held[: end.start() - len(context)].rstrip()

    def _hold_from(self) -> int:
        """Index in the held text from which it may still become a trailing token."""
        held = self._held
        body_end = len(held.rstrip())
        for core in range(max(0, body_end - _SILENT_TAIL_CORE), body_end + 1):
            before = held[core - 1] if core else self._last_shown
            if before and _WORDISH.match(before):
                continue
            if _SILENT_TAIL_VIABLE.fullmatch(held, core):
                return len(held[:core].rstrip())
        return body_end


# ---------------------------------------------------------------------------------------------
# HEARTBEAT_OK.

_HB_WRAP = r"[*_~`]{0,3}"
_HEARTBEAT_START = re.compile(r"\s*" + _HB_WRAP + HEARTBEAT_TOKEN + _HB_WRAP + r"[.!]*(?![\w])")
_HEARTBEAT_END = re.compile(r"(?<![\w*~`])" + _HB_WRAP + HEARTBEAT_TOKEN + _HB_WRAP + r"[.!]*\s*\Z")


def strip_heartbeat_ok(text: str, max_rest: int = 300) -> tuple[bool, str]:
    """Apply the heartbeat rule: `(suppress, remaining_text)`.

    HEARTBEAT_OK at the start or end (optionally `**wrapped**` or followed by `.`/`!`) is
    removed; the reply is suppressed when at most `max_rest` characters remain. Without the
    token the text is returned unchanged and not suppressed.
    """
    rest, found = text, False
    start = _HEARTBEAT_START.match(rest)
    if start is not None:
        rest, found = rest[_skip_separators(rest, start.end()) :], True
    end = _HEARTBEAT_END.search(rest)
    if end is not None:
        rest, found = rest[: end.start()], True
    if not found:
        return False, text
    rest = rest.strip()
    return len(rest) <= max_rest, rest
