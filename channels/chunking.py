"""Splitting a Markdown reply into chunks that fit a platform's message limit.

Owns `split_markdown` (public contract, DESIGN section 10). Where code fences are is read by
`markup.fences`, the reader the sanitizer and the renderers use too, so a chunk's code is the
code they see. Pure functions over strings: no I/O, no platform knowledge.

What a split guarantees, for any text and any `limit >= 1`:

- every chunk is at most `limit` characters (Python characters, i.e. code points), counting
  the fence lines added at the cut; no chunk is empty or whitespace-only, none starts with a
  line break or ends with whitespace; whitespace-only text gives `[]`;
- cuts fall, by preference, at a paragraph break (blank line), then a line break, then after
  a sentence (`.`, `!`, `?` before whitespace), then between words; a hard cut (never inside
  a surrogate pair or right before a combining mark/ZWJ/variation selector when avoidable) is
  the last resort. A preferred break is used when it lies in the back half of the room
  available; otherwise the latest break of any kind wins;
- inside a code fence only line breaks are used (or a hard cut for a line longer than the
  limit). A chunk that ends inside a fence gets a closing line (the same character repeated
  as often as in the opening marker, e.g. ```` ``` ```` or `~~~~`) and the next chunk starts
  with the original opening line again (e.g. ```` ```python ````), so each chunk renders on
  its own. This repair is guaranteed when the opening line plus closing line need at most
  half the limit; otherwise the bare marker is used, and a fence whose marker alone is too
  long for that is cut like prose. A fence that is never closed is closed at the end of the
  last chunk. A chunk never ends with a fence just opened and still empty, nor starts with a
  reopened fence whose only content is its closing line, unless nothing else fits;
- a cut inside a line never leaves a piece that would render differently on its own line:
  outside a fence no piece may read as a fence opener (`a ~~~ b` is not cut before `~~~`),
  inside one no piece may read as its closer; when nothing else fits (a cut inside a fence's
  opening or closing line), the chunk is closed and the next reopened as the pieces render;
- splitting is linear in the text's length (the fence index is built by regex scans, every
  question about a piece is memoised, and at most 64 break points of each kind are tried
  before a hard cut), so a megabyte of any text splits in well under a second;
- content is kept in order: with `split_markdown_chunks`, each `MarkdownChunk.body` is an
  exact slice of the input, and the input is the concatenation
  `gap_0 + body_0 + gap_1 + body_1 + ... + body_k + gap_k+1` where every gap is whitespace
  only. Whitespace is dropped only at the cuts: the trailing whitespace of a chunk, and at the
  start of the next one the blank lines (the indentation of its first line is kept) or, after
  a cut inside a line, the separating spaces.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from channels.fences import FenceIndex, FenceSpan
from markup.fences import Fence, parse_fence

__all__ = ["MarkdownChunk", "split_markdown", "split_markdown_chunks"]

_NON_SPACE = re.compile(r"\S")
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n")
_LINE_BREAK = re.compile(r"\n")
_SENTENCE_END = re.compile(r"[.!?…](?=\s)|[。！？]")
_WORD_BREAK = re.compile(r"[ \t]+")
_CLUSTER_CONTINUERS = frozenset("\u200d\ufe0e\ufe0f\u20e3")
# Break points tried per kind before a hard cut: ordinary text fits at the first or second;
# only text built to defeat every break (e.g. " ~~~" repeated) gets this far.
_MAX_TRIES = 64


@dataclass(frozen=True, slots=True)
class MarkdownChunk:
    """One chunk: an exact slice of the input (`body`) plus the fence lines added at the cuts.

    `reopen` is the fence line put before the body (the original opening line, or "" when the
    chunk does not start inside a fence); `close` the line put after it ("" when none).
    """

    reopen: str
    body: str
    close: str

    @property
    def text(self) -> str:
        head = f"{self.reopen}\n" if self.reopen else ""
        tail = f"\n{self.close}" if self.close else ""
        return f"{head}{self.body}{tail}"


def split_markdown(
    text: str, limit: int = 4000, *, measure: Callable[[str], int] | None = None
) -> list[str]:
    """Split Markdown into chunks of at most `limit` characters; see the module docstring.

    `measure` counts length the platform's way when that is not code points (Telegram and
    Signal count UTF-16 units, so an emoji is 2): a chunk over `limit` by that measure is
    split again, smaller, until every chunk fits.
    """
    chunks = [chunk.text for chunk in split_markdown_chunks(text, limit)]
    if measure is None:
        return chunks
    fitted: list[str] = []
    for chunk in chunks:
        size = measure(chunk)
        smaller = limit
        parts = [chunk]
        while size > limit and smaller > 1:
            # Each chunk is self-contained Markdown (fences closed), so it splits cleanly.
            smaller = max(1, min(smaller - 1, smaller * limit // size))
            parts = [c.text for c in split_markdown_chunks(chunk, smaller)]
            size = max(measure(p) for p in parts)
        fitted.extend(parts)
    return fitted


def split_markdown_chunks(text: str, limit: int = 4000) -> list[MarkdownChunk]:
    """`split_markdown`, keeping apart what came from the input and what was added."""
    if limit < 1:
        raise ValueError(
            f"split_markdown: limit must be at least 1 character, got {limit}; "
            "pass the platform's message limit minus some headroom (e.g. 4000)"
        )
    if not text.strip():
        return []
    return _Splitter(text, limit).run()


def _open_after(chunk: str) -> Fence | None:
    """The fence a chunk leaves open when rendered on its own (None: all closed)."""
    fence: Fence | None = None
    for line in chunk.split("\n"):
        if fence is None:
            fence = parse_fence(line)
        elif fence.closes(line):
            fence = None
    return fence


class _Splitter(FenceIndex):
    """One split of one text: greedy chunking from the front over its `FenceIndex`."""

    def run(self) -> list[MarkdownChunk]:
        chunks: list[MarkdownChunk] = []
        position = self._skip_gap(0)
        while position < len(self.text):
            chunk, end = self._next_chunk(position)
            chunks.append(chunk)
            position = self._skip_gap(end)
        return chunks

    def _skip_gap(self, position: int) -> int:
        """Where the next chunk starts: past blank lines, keeping the first line's indent."""
        text = self.text
        match = _NON_SPACE.search(text, position)
        if match is None:
            return len(text)
        first = match.start()
        newline = text.rfind("\n", position, first)
        if newline >= 0:
            return newline + 1
        if position == 0 or text[position - 1] == "\n":
            return position
        return first

    def _next_chunk(self, position: int) -> tuple[MarkdownChunk, int]:
        text = self.text
        self._failed.clear()
        self._rendered_checks = 0
        self._start_unchecked = not self._last_strict
        reopen = self._reopen_for(position)
        budget = self.limit - (len(reopen) + 1 if reopen else 0)
        first = self._non_space_from(position)
        if first - position >= budget // 2:
            position = first  # absurd indentation: drop it rather than fill a chunk with it
        self._chunk_start = position
        whole = self._fit(position, len(text), first, reopen, strict=True)
        if whole is not None:
            return whole
        window_end = min(len(text), position + budget)
        chosen = self._fit_at_breaks(position, first, window_end, budget, reopen)
        if chosen is not None:
            return chosen
        return self._hard_cut(position, first, window_end, reopen)

    def _fit_at_breaks(
        self, position: int, first: int, window_end: int, budget: int, reopen: str
    ) -> tuple[MarkdownChunk, int] | None:
        window = self.text[position : window_end + 1]
        kinds: list[list[int]] = []
        for pattern, prose_only, use_end in (
            (_PARAGRAPH_BREAK, False, False),
            (_LINE_BREAK, False, False),
            (_SENTENCE_END, True, True),
            (_WORD_BREAK, True, False),
        ):
            found: list[int] = []
            for match in pattern.finditer(window):
                cut = position + (match.end() if use_end else match.start())
                if not first < cut <= window_end:
                    continue
                if prose_only and self._fence_at(cut) is not None:
                    continue
                found.append(cut)
            kinds.append(found)
        half = position + budget // 2
        for found in kinds:
            for cut in itertools.islice(reversed(found), _MAX_TRIES):
                if cut < half:
                    break
                fitted = self._fit(position, cut, first, reopen, strict=True)
                if fitted is not None:
                    return fitted
        every = sorted({cut for found in kinds for cut in found}, reverse=True)
        for cut in every[:_MAX_TRIES]:
            fitted = self._fit(position, cut, first, reopen, strict=True)
            if fitted is not None:
                return fitted
        return None

    def _hard_cut(
        self, position: int, first: int, window_end: int, reopen: str
    ) -> tuple[MarkdownChunk, int]:
        line = self._line_at(first)
        # Inside one fence opening or closing line no strict cut exists: go straight to the
        # last resort instead of trying every offset twice.
        strict_possible = line.before is line.after or window_end > line.end
        tiers = ((True, True), (True, False)) if strict_possible else ()
        for strict, whole_clusters in (*tiers, (False, False)):
            self._skip_to = window_end
            for cut in range(window_end, first, -1):
                if cut > self._skip_to or self.text[cut - 1].isspace():
                    continue  # too long once closed, or the same chunk as a cut before it
                if whole_clusters and self._splits_cluster(cut):
                    continue
                fitted = self._fit(position, cut, first, reopen, strict=strict)
                if fitted is not None:
                    return fitted
        # Unreachable for limit >= 1 (one character always fits); kept as a safe floor.
        self._last_strict = False
        return MarkdownChunk("", self.text[first : first + 1], ""), first + 1

    def _splits_cluster(self, cut: int) -> bool:
        text = self.text
        if cut <= 0 or cut >= len(text):
            return False
        following, preceding = text[cut], text[cut - 1]
        return (
            following in _CLUSTER_CONTINUERS
            or preceding == "\u200d"
            or unicodedata.combining(following) != 0
            or 0x1F3FB <= ord(following) <= 0x1F3FF
            or "\udc00" <= following <= "\udfff"
        )

    def _fit(
        self, position: int, cut: int, first: int, reopen: str, *, strict: bool
    ) -> tuple[MarkdownChunk, int] | None:
        """The chunk `text[position:cut]` (trailing whitespace dropped) if it fits, else None.

        Strict mode also refuses the ugly cuts: an empty fence at either end of the chunk,
        and a cut inside a line that leaves a piece looking like a fence line.
        """
        end = self._strip_end(cut, position)
        if end <= first or end - position > self.limit or (end, strict) in self._failed:
            return None
        fitted = self._fit_stripped(position, end, reopen, strict=strict)
        if fitted is None:
            self._failed.add((end, strict))
        return fitted

    def _fit_stripped(
        self, position: int, end: int, reopen: str, *, strict: bool
    ) -> tuple[MarkdownChunk, int] | None:
        text = self.text
        span = self._repairable_fence_at(end)
        if strict:
            end = self._take_real_close(end)
            span = self._repairable_fence_at(end)
            if span is not None and span.open_start >= position and self._blank(span.open_end, end):
                return None  # would end with a fence opened and still empty
            if not self._clean_inner_cut(end):
                return None
        elif self._tail_closes_reopened_fence(end):
            return None
        close = self._close_for(end, span)
        size = (
            (len(reopen) + 1 if reopen else 0) + (end - position) + (len(close) + 1 if close else 0)
        )
        if size > self.limit:
            return None
        if not strict or self._start_unchecked:
            # A last-resort cut, or a chunk starting right after one: judge the chunk as it
            # renders and close what it leaves open.
            if self._rendered_checks >= _MAX_TRIES:
                return None
            self._rendered_checks += 1
            body = text[position:end]
            still_open = _open_after(f"{reopen}\n{body}" if reopen else body)
            close = still_open.char * still_open.length if still_open is not None else ""
            over = len(reopen) + len(body) + len(close) + bool(reopen) + bool(close) - self.limit
            if over > 0:
                # The body must shrink; by at least half the excess, as a piece's own close
                # shrinks with it at most one for one.
                self._skip_to = end - max(1, over // 2)
                return None
        self._last_strict = strict
        return MarkdownChunk(reopen, text[position:end], close), end

    def _close_for(self, end: int, span: FenceSpan | None) -> str:
        """The line that closes what the chunk ending at `end` leaves open, as rendered.

        A cut inside a fence's opening line closes what the piece opened (nothing when the
        cut splits the marker); inside its closing line, the fence unless the piece closes it.
        """
        line = self._line_at(end)
        if line.before is line.after or self._blank(end, line.end) or line.start >= end:
            return span.close if span is not None and span.close is not None else ""
        head_start = max(line.start, self._chunk_start)
        if line.after is not None:  # inside an opening line
            if head_start > line.start:  # the chunk reopened this fence already
                return line.after.close or ""
            marker = self._marker(head_start)
            if marker is None or not self._opens_fence(head_start, end):
                return ""
            return self.text[marker[0]] * (min(marker[1], end) - marker[0])
        closing = line.before
        assert closing is not None
        inside = closing.reopen is not None or closing.open_start >= self._chunk_start
        if not inside or self._breaks_out(head_start, end, closing):
            return ""
        return closing.close or ""

    def _tail_closes_reopened_fence(self, end: int) -> bool:
        """True for a cut inside an opening line whose rest would close the fence reopened
        before it (`~~~ info ~~~` cut before the last `~~~`)."""
        line = self._line_at(end)
        opened = line.after
        if opened is None or line.before is not None or opened.reopen is None:
            return False
        tail_start = self._non_space_from(end)
        return tail_start < line.end and self._breaks_out(tail_start, line.end, opened)

    def _reopen_for(self, position: int) -> str:
        """The fence line that starts a chunk at `position`, so it renders as the text does."""
        line = self._line_at(position)
        if position > line.start and line.before is not None and line.after is None:
            # Inside a closing line: reopen only if the rest of it does the closing.
            closing = line.before
            if closing.reopen is not None and self._breaks_out(position, line.end, closing):
                return closing.reopen
            return ""
        span = self._repairable_fence_at(position)
        return span.reopen if span is not None and span.reopen is not None else ""

    def _take_real_close(self, end: int) -> int:
        """Past the fence's own closing line when only whitespace is left before it."""
        span = self._repairable_fence_at(end)
        if span is None or span.close_start is None or span.close_end is None:
            return end
        return span.close_end if self._blank(end, span.close_start) else end

    def _clean_inner_cut(self, end: int) -> bool:
        """False when a cut inside a line splits a fence line or leaves a piece that parses
        as one."""
        line = self._line_at(end)
        if self._blank(end, line.end):
            return True
        if line.before is not line.after:
            return False  # inside a fence's own opening or closing line
        span = line.before  # a line inside a fence is its content: pieces must not close it
        head_inside = span is not None and (
            span.reopen is not None or span.open_start >= self._chunk_start
        )
        tail_inside = span is not None and span.reopen is not None
        head_start = max(line.start, self._chunk_start)
        tail_start = min(self._non_space_from(end), line.end)
        return not self._breaks_out(head_start, end, span if head_inside else None) and not (
            self._breaks_out(tail_start, line.end, span if tail_inside else None)
        )
