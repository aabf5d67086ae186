"""Code fences in Markdown: the one reader of where fenced code starts and ends.

Owns `Fence` / `parse_fence` (one line) and `fenced_blocks` (a whole text, by regex scans).
The chunker (`channels.fences`), the reply sanitizer (`agents.sanitize.regions`) and the
renderers' block reader (`channels.markdown`) all ask it, so a reply's code is the same code
wherever it is cut, cleaned or drawn. The rule, CommonMark's with the choices marked:

- A line ends at "\n"; the "\r" of "\r\n" is trailing whitespace. A lone "\r" is an
  ordinary character (CommonMark breaks the line there): the chunker and the sanitizer keep
  exact offsets and cut only at "\n", so the renderer reads the same lines they do.
- An opening fence: spaces or tabs, then 3 or more backticks or 3 or more tildes, then an
  info string (its first word is the language); a backtick fence's info string holds no
  backtick (```` ```a``` ```` at a line start is inline code). Any indentation (CommonMark:
  at most 3 spaces): no reader here tracks list items, and a code block inside a list item,
  indented 4 or more in a nested list, must stay code.
- The closing fence: whitespace, the opener's character at least as many times, then only
  whitespace, where whitespace is Python's (`str.isspace`, not "\n": spaces, tabs, "\r",
  no-break and other Unicode spaces). CommonMark allows only spaces and tabs here; we take
  all whitespace because the chunker drops whitespace at the ends of each chunk (and the
  renderers strip lines), so only a closing rule that whitespace cannot change keeps a cut
  chunk reading as the whole text does. A fence never closed runs to the end of the text.
- Fences are read at the top level. A block quote's lines (`> ```...`) are prose to the
  chunker and the sanitizer; the renderer reads the quote's content with this same reader.

Before this module there were three readers, and they disagreed on three points, settled
here: (1) around a closing fence the sanitizer allowed spaces and tabs only, the chunker and
the renderers any whitespace, so `` ```\u00a0 `` closed a block for two of them while the
sanitizer left the rest of the reply alone as code; any whitespace wins, for the reason
above (CommonMark's stricter rule was tried: a chunk whose last line `` ```\u00a0 `` lost
its trailing space at a cut turned from code into a closing fence). (2) The renderers broke
lines at a lone "\r", the others not; "\n" wins, for the offsets above. (3) The renderers
let a table row swallow a following fence line that held a "|"; a fence ends a table, as in
GFM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "CLOSER_START",
    "OPENER_START",
    "Fence",
    "FencedBlock",
    "fenced_blocks",
    "parse_fence",
]

# How a fence line starts: its indentation and marker run (group 1), opening or closing.
OPENER_START = re.compile(r"[ \t]*(`{3,}|~{3,})")
CLOSER_START = re.compile(r"[^\S\n]*(`{3,}|~{3,})")

_OPENER = re.compile(r"(?P<indent>[ \t]*)(?P<marker>`{3,}|~{3,})(?P<info>[^\n]*)")
_CLOSER = re.compile(r"[^\S\n]*(?P<marker>`{3,}|~{3,})[^\S\n]*")
_CANDIDATE = re.compile(r"(?m)^(?P<indent>[^\S\n]*)(?P<marker>`{3,}|~{3,})(?P<info>[^\n]*)")


@dataclass(frozen=True, slots=True)
class Fence:
    """An opening code fence line: `` ```python `` or `~~~~`, possibly indented."""

    indent: str
    char: str
    length: int
    info: str

    @property
    def language(self) -> str:
        """The first word of the info string (`"python"` for `` ```python title="x" ``)."""
        words = self.info.split()
        return words[0] if words else ""

    @property
    def marker(self) -> str:
        return self.char * self.length

    def closes(self, line: str) -> bool:
        """True when `line` (without its "\\n") closes this fence."""
        match = _CLOSER.fullmatch(line)
        if match is None:
            return False
        marker = match["marker"]
        return marker[0] == self.char and len(marker) >= self.length


def parse_fence(line: str) -> Fence | None:
    """The fence `line` (without its "\\n") opens, or None."""
    match = _OPENER.fullmatch(line)
    return _opener(match["indent"], match["marker"], match["info"]) if match else None


def _opener(indent: str, marker: str, info: str) -> Fence | None:
    if marker[0] == "`" and "`" in info:
        return None
    return Fence(indent, marker[0], len(marker), info.strip())


@dataclass(frozen=True, slots=True)
class FencedBlock:
    """One fenced code block of a text, by offsets.

    `start` is where its opening line starts, `open_end` where that line ends (its "\\n" or
    the text's end); `close_start` where the closing line starts (None: never closed) and
    `end` where the block ends: the end of the closing line, or of the text.
    """

    fence: Fence
    start: int
    open_end: int
    close_start: int | None
    end: int

    @property
    def closed(self) -> bool:
        return self.close_start is not None


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced code block of `text`, in order.

    Only lines that start like a fence are looked at in Python, so reading is a regex scan
    however many lines the text has. Reading the text line by line with `parse_fence` and
    `Fence.closes` finds the same blocks.
    """
    if "```" not in text and "~~~" not in text:
        return []
    blocks: list[FencedBlock] = []
    fence: Fence | None = None
    start = open_end = 0
    for match in _CANDIDATE.finditer(text):
        if fence is None:
            if match["indent"].strip(" \t"):
                continue  # indented by other whitespace: closes a fence, opens none
            fence = _opener(match["indent"], match["marker"], match["info"])
            start, open_end = match.start(), match.end()
        elif fence.closes(match.group(0)):
            blocks.append(FencedBlock(fence, start, open_end, match.start(), match.end()))
            fence = None
    if fence is not None:
        blocks.append(FencedBlock(fence, start, open_end, None, len(text)))
    return blocks
