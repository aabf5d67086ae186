"""What a terminal would show for a stream of output: text, CR, LF, erase-line, cursor-up.

Enough of a terminal to check the console's screen: `TerminalView.feed(text)` applies what
the console (and a tty's echo) writes; `rows()` is the screen as lines, `last()` the row with
the cursor. Other escape sequences are dropped.
"""

from __future__ import annotations

import re

_CSI = re.compile(r"\x1b\[([0-9;]*)([A-Za-z])")


class TerminalView:
    def __init__(self) -> None:
        self._rows: list[list[str]] = [[]]
        self._row = 0
        self._col = 0

    def feed(self, text: str) -> None:
        i = 0
        while i < len(text):
            char = text[i]
            match = _CSI.match(text, i) if char == "\x1b" else None
            if match:
                count = int(match.group(1) or 1)
                if match.group(2) == "K":
                    del self._rows[self._row][self._col :]
                elif match.group(2) == "A":
                    self._row = max(self._row - count, 0)
                i = match.end()
                continue
            if char == "\r":
                self._col = 0
            elif char == "\n":
                self._row += 1
                self._col = 0
                if self._row == len(self._rows):
                    self._rows.append([])
            elif char == "\b":
                self._col = max(self._col - 1, 0)
            elif char >= " ":
                row = self._rows[self._row]
                row.extend(" " * (self._col - len(row)))
                if self._col < len(row):
                    row[self._col] = char
                else:
                    row.append(char)
                self._col += 1
            i += 1

    def rows(self) -> list[str]:
        return ["".join(r) for r in self._rows[: self._row + 1]]

    def last(self) -> str:
        return "".join(self._rows[self._row])
