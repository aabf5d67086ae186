"""An index of one text's code fences, and the questions the chunker asks about its pieces.

Owns `FenceIndex`, what `channels.chunking` asks about one text while it cuts it: which line
an offset is on, which fence is open there, and whether a piece of a line would read as a
fence opener or closer if shown on a line of its own. Where fences are is read by
`markup.fences` (the one fence reader, shared with the sanitizer and the renderers), and the
piece questions follow its rule. Every question is amortised O(1) (regex scans up front,
memos after), so splitting stays linear.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from markup.fences import CLOSER_START, OPENER_START, Fence, fenced_blocks

__all__ = ["FenceIndex", "FenceSpan", "Line"]

_NON_SPACE = re.compile(r"\S")
_BACKTICK = re.compile(r"`")
_NEWLINE = re.compile(r"\n")


@dataclass(slots=True)
class FenceSpan:
    """Where one fence sits in the text, and how it is repaired at a cut (None: it isn't)."""

    fence: Fence
    open_start: int
    open_end: int
    close_start: int | None = None
    close_end: int | None = None
    reopen: str | None = None
    close: str | None = None


@dataclass(slots=True)
class Line:
    start: int
    end: int  # index of the line's "\n", or len(text)
    before: FenceSpan | None  # fence open when the line starts
    after: FenceSpan | None  # fence open once the line is read


class FenceIndex:
    """Line starts and fences of one text, and memoised questions about its pieces."""

    """One split of one text: line/fence index, then greedy chunking from the front."""

    def __init__(self, text: str, limit: int) -> None:
        self.text = text
        self.limit = limit
        self._index_fences()
        self._chunk_start = 0  # where the chunk being built starts (set by the splitter)
        self.backticks = [m.start() for m in _BACKTICK.finditer(text)]
        # Memos that keep every question about the text amortised O(1): where the
        # whitespace before an offset starts, where the next non-space after it is, and how
        # a piece starting at an offset begins (indent + fence marker).
        self._stripped: dict[int, int] = {}
        self._next_non_space: dict[int, int] = {}
        self._marker_at: dict[tuple[int, bool], tuple[int, int] | None] = {}
        self._failed: set[tuple[int, bool]] = set()
        self._rendered_checks = 0  # last-resort cuts checked as rendered, this chunk
        self._last_strict = True  # how the previous chunk's cut was chosen
        self._start_unchecked = False  # this chunk starts after a last-resort cut
        self._skip_to = 0  # hard cuts above this offset can't fit once closed

    def _index_fences(self) -> None:
        """Line starts, and every fence (`markup.fences.fenced_blocks`) with the lines it
        opens and closes on, and the lines that reopen and close it at a cut."""
        text = self.text
        self.starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
        self.spans: list[FenceSpan] = []
        self.span_lines: list[tuple[int, int]] = []  # (opening line, closing line or -1)
        room = self.limit // 2  # fence lines repeated at a cut take at most half a chunk
        line = counted = 0  # `line` is the line number of offset `counted`
        for block in fenced_blocks(text):
            fence = block.fence
            current = FenceSpan(fence, block.start, block.open_end)
            reopen = text[block.start : block.open_end].rstrip()
            if len(reopen) + len(fence.indent) + fence.length + 2 <= room:
                current.reopen, current.close = reopen, fence.indent + fence.marker
            elif 2 * fence.length + 2 <= room:
                current.reopen = current.close = fence.marker
            line += text.count("\n", counted, block.start)
            opened, counted = line, block.start
            closing = len(self.starts)
            if block.close_start is not None:
                current.close_start = block.close_start
                current.close_end = block.close_start + len(
                    text[block.close_start : block.end].rstrip()
                )
                line += text.count("\n", counted, block.close_start)
                counted = block.close_start
                closing = line
            self.spans.append(current)
            self.span_lines.append((opened, closing))
        self.span_openers = [opening for opening, _ in self.span_lines]

    def _line_at(self, offset: int) -> Line:
        index = bisect_right(self.starts, offset) - 1
        start = self.starts[index]
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.text)
        before = after = None
        found = bisect_right(self.span_openers, index) - 1
        if found >= 0:
            opening, closing = self.span_lines[found]
            span = self.spans[found]
            before = span if opening < index <= closing else None
            after = span if opening <= index < closing else None
        return Line(start, end, before, after)

    def _fence_at(self, offset: int) -> FenceSpan | None:
        """The fence open once `text[:offset]` is read (repairable or not)."""
        line = self._line_at(offset)
        return line.before if offset == line.start else line.after

    def _repairable_fence_at(self, offset: int) -> FenceSpan | None:
        span = self._fence_at(offset)
        return span if span is not None and span.reopen is not None else None

    def _blank(self, start: int, end: int) -> bool:
        return start >= end or self._non_space_from(start) >= end

    def _non_space_from(self, start: int) -> int:
        """Offset of the first non-whitespace character at or after `start` (or len)."""
        found = self._next_non_space.get(start)
        if found is None:
            match = _NON_SPACE.search(self.text, start)
            found = match.start() if match is not None else len(self.text)
            self._next_non_space[start] = found
        return found

    def _strip_end(self, end: int, floor: int) -> int:
        """`end` moved back over whitespace, not below `floor` (amortised O(1))."""
        text, walked = self.text, []
        while end > 0 and text[end - 1].isspace():
            cached = self._stripped.get(end)
            if cached is not None:
                end = cached
                break
            walked.append(end)
            end -= 1
        for offset in walked:
            self._stripped[offset] = end
        return max(end, floor)

    def _marker(self, start: int, *, closing: bool = False) -> tuple[int, int] | None:
        """Where the fence marker run starts and ends when `start` begins indent + marker
        (the indentation an opening or a closing fence may have, `markup.fences`)."""
        key = (start, closing)
        if key not in self._marker_at:
            match = (CLOSER_START if closing else OPENER_START).match(self.text, start)
            self._marker_at[key] = (match.start(1), match.end(1)) if match else None
        return self._marker_at[key]

    def _opens_fence(self, start: int, end: int) -> bool:
        """True when the piece `text[start:end]` (within one line) reads as a fence opener."""
        if start >= end:
            return False
        marker = self._marker(start)
        if marker is None:
            return False
        marker_start, marker_end = marker
        if min(marker_end, end) - marker_start < 3:
            return False
        if self.text[marker_start] != "`" or marker_end >= end:
            return True
        following = bisect_left(self.backticks, marker_end)
        return following == len(self.backticks) or self.backticks[following] >= end

    def _breaks_out(self, start: int, end: int, inside: FenceSpan | None) -> bool:
        """True when a piece of a line, shown on its own line, would open a fence (outside
        one) or close the fence it stands in."""
        if inside is None:
            return self._opens_fence(start, end)
        marker = self._marker(start, closing=True)
        if marker is None or self.text[marker[0]] != inside.fence.char:
            return False
        marker_start, marker_end = marker
        return min(marker_end, end) - marker_start >= inside.fence.length and (
            end <= marker_end or self._blank(marker_end, end)
        )
