"""The parts of a reply no cleanup step may touch: fenced code blocks and inline code spans.

`split_fences` cuts a reply into prose and fenced-code segments where `markup.fences` finds
them (the reader the chunker and the renderers use too: ``` or ~~~, any indentation, an
unclosed fence runs to the end). `Masker` swaps each inline code span of a prose segment for a
placeholder so the steps can't see into it, and puts it back.

Placeholders can never collide with the reply's own text, whatever it contains: the one
sentinel character (U+E000) is escaped where it already occurs (as U+E000 U+E001), and a
placeholder is U+E000, the span's number in decimal, U+E002. Unmasking reads both forms back;
anything else starting with U+E000 (which the steps, deleting only whole tags, lines or
spaces, never produce) is left as it is rather than raising.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from markup.fences import fenced_blocks

_BACKTICK_RUN = re.compile(r"`+")

SENTINEL = "\ue000"
_ESCAPED = SENTINEL + "\ue001"
_END = "\ue002"
_MASKED = re.compile(SENTINEL + "(?:\ue001|([0-9]{1,9})" + _END + ")")


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of a reply: fenced code (`code`) or the prose between fences."""

    code: bool
    text: str


def split_fences(text: str) -> list[Segment]:
    """Prose and fenced-code segments; joining their texts with "\\n" gives `text` back."""
    blocks = fenced_blocks(text)
    if not blocks:
        return [Segment(False, text)]
    segments: list[Segment] = []
    prose_start = 0
    for block in blocks:
        if block.start > prose_start:
            segments.append(Segment(False, text[prose_start : block.start - 1]))
        segments.append(Segment(True, text[block.start : block.end]))
        prose_start = block.end + 1
    if prose_start <= len(text):
        segments.append(Segment(False, text[prose_start:]))
    return segments


def inline_code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each inline code span on one line (CommonMark backtick runs).

    Linear: each run's partner (the next run of the same width) is found from a table built
    right to left, not by scanning ahead.
    """
    runs = [(m.start(), m.end()) for m in _BACKTICK_RUN.finditer(line)]
    following: list[int] = [-1] * len(runs)
    last_of_width: dict[int, int] = {}
    for index in range(len(runs) - 1, -1, -1):
        width = runs[index][1] - runs[index][0]
        following[index] = last_of_width.get(width, -1)
        last_of_width[width] = index
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        closer = following[i]
        if closer < 0:
            i += 1
            continue
        spans.append((runs[i][0], runs[closer][1]))
        i = closer + 1
    return spans


class Masker:
    """Swaps protected text for placeholders that cannot collide with the text around them."""

    def __init__(self) -> None:
        self._table: list[str] = []
        self._by_content: dict[str, str] = {}

    def placeholder(self, original: str, *, shared: bool) -> str:
        """A placeholder for `original`; `shared` ones are equal for equal content."""
        if shared and original in self._by_content:
            return self._by_content[original]
        token = f"{SENTINEL}{len(self._table)}{_END}"
        self._table.append(original)
        if shared:
            self._by_content[original] = token
        return token

    def mask_prose(self, text: str) -> str:
        """`text` with each inline code span replaced and the sentinel escaped elsewhere."""
        if "`" not in text:
            return text.replace(SENTINEL, _ESCAPED) if SENTINEL in text else text
        lines = []
        for line in text.split("\n"):
            if "`" not in line:
                lines.append(line.replace(SENTINEL, _ESCAPED))
                continue
            pieces, pos = [], 0
            for start, end in inline_code_spans(line):
                pieces.append(line[pos:start].replace(SENTINEL, _ESCAPED))
                pieces.append(self.placeholder(line[start:end], shared=True))
                pos = end
            pieces.append(line[pos:].replace(SENTINEL, _ESCAPED))
            lines.append("".join(pieces))
        return "\n".join(lines)

    def unmask(self, text: str) -> str:
        if SENTINEL not in text:
            return text
        return _MASKED.sub(self._restore, text)

    def _restore(self, match: re.Match[str]) -> str:
        number = match.group(1)
        if number is None:
            return SENTINEL
        index = int(number)
        return self._table[index] if index < len(self._table) else match.group(0)


def outside_code(text: str, clean: Callable[[str], str]) -> str:
    """Apply `clean` to each prose stretch between fences, inline code masked."""
    if not text:
        return text
    masker = Masker()
    parts = []
    for segment in split_fences(text):
        if segment.code:
            parts.append(segment.text)
        else:
            parts.append(masker.unmask(clean(masker.mask_prose(segment.text))))
    return "\n".join(parts)


def line_start(text: str, pos: int) -> bool:
    """True when only spaces or tabs stand between the start of the line and `pos`."""
    while pos > 0 and text[pos - 1] in " \t":
        pos -= 1
    return pos == 0 or text[pos - 1] == "\n"


def next_visible(text: str, pos: int) -> str:
    """The first character at or after `pos` that is not a space or tab ("" at the end)."""
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return text[pos : pos + 1]


def drop_lone_closer_lines(text: str, closer: re.Pattern[str]) -> str:
    return "\n".join(line for line in text.split("\n") if not closer.fullmatch(line))


def join_removed(kept: list[str], rest: str) -> str:
    """`kept` pieces and `rest` joined, one space left where a removal stood between two."""
    out: list[str] = []
    for piece in [*kept, rest]:
        if out and out[-1][-1:] in (" ", "\t") and piece[:1] in (" ", "\t"):
            piece = piece.lstrip(" \t")
        if piece:
            out.append(piece)
    return "".join(out)
