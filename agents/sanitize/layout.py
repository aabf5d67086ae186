"""Steps 6 and 7 of the sanitizer: a paragraph repeated back to back, leading blank lines.

A paragraph (blocks split at blank lines) equal to the one before it is dropped; inline code
counts as its text, and a fenced code block is never dropped, even when repeated.
"""

from __future__ import annotations

import itertools
import re

from agents.sanitize.regions import Masker, split_fences

_BLANK_LINES = re.compile(r"\n(?:[ \t\r]*\n)+")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t\r]*\n)+")


def collapse_consecutive_duplicate_blocks(text: str) -> str:
    """Drop a paragraph that repeats the one before it; fenced code blocks are never dropped."""
    if "\n" not in text or not _BLANK_LINES.search(text):
        return text
    raw = [block.strip() for block in _BLANK_LINES.split(text)]
    if all(a != b or not a for a, b in itertools.pairwise(raw)):
        return text  # no paragraph equals the next: masking could not make one
    masker = Masker()
    masked = "\n".join(
        masker.placeholder(s.text, shared=False) if s.code else masker.mask_prose(s.text)
        for s in split_fences(text)
    )
    blocks = _BLANK_LINES.split(masked)
    kept: list[str] = []
    for block in blocks:
        if kept and block.strip() and block.strip() == kept[-1].strip():
            continue
        kept.append(block)
    if len(kept) == len(blocks):
        return text
    return masker.unmask("\n\n".join(kept))


def strip_leading_blank_lines(text: str) -> str:
    """Remove whitespace-only lines at the start, keeping the first line's indentation."""
    match = _LEADING_BLANK_LINES.match(text)
    return text[match.end() :] if match else text
