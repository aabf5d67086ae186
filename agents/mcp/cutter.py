"""Cutting an MCP server's message while it is read, so no answer is ever held whole.

`JsonCutter` takes the bytes of one JSON-RPC line as they arrive and keeps a valid JSON text of
bounded size: a string longer than its cap keeps its head (never cut inside an escape or a
UTF-8 character) and ends with a note of how much was left out. Base64 payloads (`data`,
`blob`: images, audio, blobs) may be as long as one image Perch would show, each and in total
for `MAX_IMAGES`; every other string is capped at `TEXT_CAP` bytes, all of them at
`TEXT_TOTAL` (the agent loop cuts a tool result far shorter anyway). The JSON structure around
the strings may take `STRUCTURE_CAP` bytes; a line with more structure than that cannot be cut
into anything valid, so `finish()` then answers a JSON-RPC error for the request it answered
(its top-level `id`, caught while reading), or None for a notification. Memory stays within
the caps whatever the server sends, and long runs are skipped with `re`, not byte by byte.
"""

from __future__ import annotations

import json
import re

from agents.tool_images import MAX_IMAGE_BYTES, MAX_IMAGES

TEXT_CAP = 1_000_000
TEXT_TOTAL = 2_000_000
DATA_CAP = MAX_IMAGE_BYTES * 4 // 3 + 1024  # one image at the cap, base64-encoded
DATA_TOTAL = DATA_CAP * MAX_IMAGES
STRUCTURE_CAP = 1_000_000
_DATA_KEYS = (b"data", b"blob")
_SPECIAL = re.compile(rb'["\\]')
_STRUCTURE = re.compile(rb'[^"{}\[\],:]+')
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


class JsonCutter:
    """One line's bytes in (`feed`), a bounded JSON text out (`finish`)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.out = bytearray()
        self._stack: list[tuple[int, bytes]] = []  # (b"{" or b"[", the key outside it)
        self._expect_key = False
        self._key = b""
        self._in_string = False
        self._is_key = False
        self._escaped = False  # the last byte was a backslash
        self._hex_left = 0  # digits of a \uXXXX still to come
        self._unit_kept = False  # whether the escape being read is kept
        self._cap = 0
        self._kept = 0
        self._skipped = 0
        self._key_buf = bytearray()
        self._structure = 0
        self._text_used = 0
        self._data_used = 0
        self._id: tuple[int, int] | None = None  # where the top-level id sits in `out`
        self._id_open = -1
        self.overflow = False

    # -- input -----------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        i, n = 0, len(chunk)
        while i < n and not self.overflow:
            i = self._string(chunk, i) if self._in_string else self._outside(chunk, i)

    def finish(self) -> bytes | None:
        """The line, cut to size (or the error that answers it); the cutter is reset."""
        try:
            if not self.overflow:
                return bytes(self.out)
            if self._id is None:
                return None
            raw = bytes(self.out[self._id[0] : self._id[1]]).strip()
            message = (
                f"the MCP server's message was over {STRUCTURE_CAP:,} bytes of JSON structure "
                "and was dropped while it was read"
            )
            error = {"code": -32603, "message": message}
            return json.dumps({"jsonrpc": "2.0", "id": json.loads(raw), "error": error}).encode()
        except ValueError:
            return None
        finally:
            self._reset()

    # -- outside strings -------------------------------------------------------------------

    def _outside(self, chunk: bytes, i: int) -> int:
        run = _STRUCTURE.match(chunk, i)
        if run is not None:  # whitespace, numbers, literals
            return self._structural(chunk[i : run.end()], run.end())
        byte = chunk[i : i + 1]
        if byte == b'"':
            self._open_string()
            self._structural(byte, i + 1)
            return i + 1
        if len(self._stack) == 1 and byte in (b",", b"}") and self._id_open >= 0:
            self._id, self._id_open = (self._id_open, len(self.out)), -1
        if byte in (b"{", b"["):
            self._stack.append((byte[0], self._key))
            self._expect_key = byte == b"{"
            if byte == b"{":
                self._key = b""
        elif byte in (b"}", b"]"):
            if self._stack:
                _, self._key = self._stack.pop()
            self._expect_key = False
        elif byte == b",":
            self._expect_key = bool(self._stack) and self._stack[-1][0] == ord("{")
        elif byte == b":":
            self._expect_key = False
            if len(self._stack) == 1 and self._key == b"id":
                self._id_open = len(self.out) + 1
        return self._structural(byte, i + 1)

    def _structural(self, data: bytes, end: int) -> int:
        self._structure += len(data)
        if self._structure > STRUCTURE_CAP:
            self.overflow = True
        else:
            self.out += data
        return end

    def _open_string(self) -> None:
        self._in_string = True
        self._is_key = self._expect_key
        self._kept = self._skipped = 0
        self._key_buf.clear()
        if self._is_key:
            self._cap = STRUCTURE_CAP  # keys count as structure
        elif self._key in _DATA_KEYS:
            self._cap = max(min(DATA_CAP, DATA_TOTAL - self._data_used), 0)
        else:
            self._cap = max(min(TEXT_CAP, TEXT_TOTAL - self._text_used), 0)

    # -- inside a string -------------------------------------------------------------------

    def _string(self, chunk: bytes, i: int) -> int:
        if self._escaped:  # the byte after a backslash goes where the backslash went
            self._escaped = False
            self._hex_left = 4 if chunk[i : i + 1] == b"u" else 0
            self._unit(chunk[i : i + 1])
            return i + 1
        if self._hex_left:  # the four digits of a \uXXXX, likewise
            part = chunk[i : i + self._hex_left]
            self._hex_left -= len(part)
            self._unit(part)
            return i + len(part)
        found = _SPECIAL.search(chunk, i)
        end = found.start() if found is not None else len(chunk)
        if end > i:
            self._run(chunk[i:end])
            return end
        if chunk[i : i + 1] == b'"':
            self._close_string()
            return i + 1
        # A backslash: the escape it starts (at most 6 bytes) is kept whole, or the cut is here.
        self._escaped = True
        self._unit_kept = not self._skipped and (self._is_key or self._kept + 6 <= self._cap)
        if not self._unit_kept and not self._skipped:
            self._trim()
        self._unit(b"\\")
        return i + 1

    def _unit(self, data: bytes) -> None:
        """Part of an escape: kept or skipped as the escape's backslash was."""
        if self._unit_kept:
            self._keep(data)
        else:
            self._skipped += len(data)

    def _run(self, data: bytes) -> None:
        """Plain string bytes: kept up to the cap, cut on a UTF-8 character boundary."""
        if self._is_key:
            self._keep(data)
            return
        keep = 0 if self._skipped else min(len(data), self._cap - self._kept)
        if keep:
            self._keep(data[:keep])
        if keep < len(data):
            if not self._skipped:
                self._trim()
            self._skipped += len(data) - keep

    def _trim(self) -> None:
        """Where the cut comes, drop a character left in two (its first bytes kept, the rest
        not) and a lone high surrogate escape (the low half of the pair not kept)."""
        out, end = self.out, len(self.out)
        back = 0
        while back < 3 and back < self._kept and (out[end - 1 - back] & 0xC0) == 0x80:
            back += 1
        if back < self._kept and _utf8_length(out[end - 1 - back]) > back + 1:
            self._drop(back + 1)
        tail = bytes(self.out[-6:])
        if self._kept >= 6 and _HIGH_SURROGATE.fullmatch(tail):
            run = len(self.out) - 6
            slashes = 0
            while slashes < self._kept - 6 and self.out[run - 1 - slashes] == ord("\\"):
                slashes += 1
            if slashes % 2 == 0:  # the backslash starts an escape: it is not itself escaped
                self._drop(6)

    def _drop(self, count: int) -> None:
        del self.out[len(self.out) - count :]
        self._kept -= count
        self._skipped += count

    def _keep(self, data: bytes) -> None:
        self._kept += len(data)
        if self._is_key:
            self._key_buf += data[: 16 - len(self._key_buf)]
            self._structural(data, 0)
        else:
            self.out += data

    def _close_string(self) -> None:
        self._in_string = False
        if self._is_key:
            self._key = bytes(self._key_buf)
            self._structural(b'"', 0)
            return
        if self._key in _DATA_KEYS:
            self._data_used += self._kept
        else:
            self._text_used += self._kept
        if self._skipped:
            note = f"\\n[... cut while reading: {self._skipped:,} more bytes of this not read]"
            self.out += note.encode()
        self.out += b'"'


def _utf8_length(lead: int) -> int:
    """How many bytes the UTF-8 character starting with byte `lead` has."""
    for length, mask, value in ((2, 0xE0, 0xC0), (3, 0xF0, 0xE0), (4, 0xF8, 0xF0)):
        if lead & mask == value:
            return length
    return 1
