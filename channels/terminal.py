"""The terminal the console chats on: keys in, a live bottom line out.

`Screen` draws on a text stream. Conversation text is printed above; the bottom rows are live:
the unfinished last line of a reply being written, then one line with the status (`… thinking`,
`… running web_fetch (40%)`) and the input prompt with what the person has typed so far. Every
print erases the live rows first and draws them again after, so typing during a reply never
runs into the reply or the indicator. Live rows are cut to the terminal's width (their ends are
kept: the cursor sits at the end of the draft).

`LineEditor` turns what a terminal sends in character-at-a-time mode into edits of the draft
and finished lines: printable text (UTF-8), Backspace, Ctrl-U (clear), Ctrl-W (word), Enter,
and Ctrl-D on an empty line (end of input); escape sequences (arrow keys ...) are dropped.
`RawMode` switches a terminal to that mode without echo, keeping signals (Ctrl-C interrupts)
and output processing, and restores it.
"""

from __future__ import annotations

import contextlib
import termios
import threading
import tty
import unicodedata
from collections.abc import Callable
from typing import Any, TextIO

PROMPT = "you> "
ERASE_ROW = "\r\033[K"
UP = "\033[A"


def columns(text: str) -> int:
    """How many terminal columns `text` takes (wide East Asian characters take two)."""
    total = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total


def fit_end(text: str, width: int) -> str:
    """The end of `text` within `width` columns, marked with … where it was cut."""
    if columns(text) <= width:
        return text
    kept = ""
    for char in reversed(text):
        if columns(kept) + columns(char) + 1 > width:
            break
        kept = char + kept
    return "…" + kept


class Screen:
    """Printed text above, live rows below (see the module docstring). Thread-safe."""

    def __init__(self, out: TextIO, width: Callable[[], int]) -> None:
        self._out = out
        self._width = width
        self.status = ""
        self.draft = ""
        self.tail = ""
        self._rows = 0  # live rows drawn now
        self._live = False  # draw live rows at all (between `begin` and `release`)
        self._lock = threading.Lock()

    def begin(self) -> None:
        with self._lock:
            self._live = True
            self._draw()

    def show(
        self,
        text: str = "",
        *,
        status: str | None = None,
        draft: str | None = None,
        tail: str | None = None,
    ) -> None:
        """Print `text` above (it should end with a newline) and update the live rows."""
        with self._lock:
            self._erase()
            if text:
                self._out.write(text)
            if status is not None:
                self.status = status
            if draft is not None:
                self.draft = draft
            if tail is not None:
                self.tail = tail
            self._draw()
            self._out.flush()

    def release(self) -> None:
        """Erase the live rows and draw no more (the terminal goes back to the shell)."""
        with self._lock:
            self._erase()
            self._live = False
            with contextlib.suppress(OSError, ValueError):
                self._out.flush()

    def _erase(self) -> None:
        if self._rows:
            self._out.write(ERASE_ROW + (UP + ERASE_ROW) * (self._rows - 1))
            self._rows = 0

    def _draw(self) -> None:
        if not self._live:
            return
        width = max(self._width() - 1, 10)
        rows = [fit_end(self.tail, width)] if self.tail else []
        rows.append(
            fit_end(
                f"{self.status}  {PROMPT}{self.draft}" if self.status else PROMPT + self.draft,
                width,
            )
        )
        self._out.write("\n".join(rows))
        self._rows = len(rows)


class LineEditor:
    """Keys in, the draft and finished lines out (see the module docstring)."""

    def __init__(self) -> None:
        self.draft = ""
        self._escape = ""  # an escape sequence being skipped

    def feed(self, text: str) -> list[str | None]:
        """Finished lines, in order; None stands for end of input (Ctrl-D on an empty line)."""
        done: list[str | None] = []
        for char in text:
            if self._escape:
                self._escape += char
                if len(self._escape) == 2:
                    if char not in "[O":
                        self._escape = ""  # Alt+key: dropped with its key
                elif char.isalpha() or char == "~":
                    self._escape = ""  # the end of ESC [ ... X or ESC O X
                continue
            if char == "\x1b":
                self._escape = char
            elif char in "\r\n":
                done.append(self.draft)
                self.draft = ""
            elif char in "\x7f\x08":
                self.draft = self.draft[:-1]
            elif char == "\x15":
                self.draft = ""
            elif char == "\x17":
                self.draft = self.draft.rstrip()
                self.draft = self.draft[: self.draft.rfind(" ") + 1]
            elif char == "\x04":
                if not self.draft:
                    done.append(None)
            elif char == "\t":
                self.draft += " "
            elif char >= " ":
                self.draft += char
        return done


class RawMode:
    """Character-at-a-time input without echo on terminal `fd`; `restore` undoes it."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = termios.tcgetattr(fd)

    def enter(self) -> None:
        tty.setcbreak(self.fd, termios.TCSANOW)  # ISIG and OPOST stay: Ctrl-C, \n -> \r\n

    def restore(self) -> None:
        if self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSANOW, self._saved)
