"""Markdown read into plain text plus style ranges: the platform-free base of plain rendering.

Owns `utf16_len` and the styled-text builder (quote prefixes per line; ranges of BOLD, ITALIC,
STRIKETHROUGH and MONOSPACE in UTF-16 code units). `markdown_to_plain` is the text every
platform falls back to; a platform with text styles (Signal) turns the ranges into its own
form. May raise on a bug: callers go through `channels.formatting.render_safely`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from channels.markdown import (
    RULE_TEXT,
    Block,
    Code,
    CodeBlock,
    Emphasis,
    Heading,
    Inline,
    Item,
    Link,
    Paragraph,
    Quote,
    Rule,
    SlackToken,
    Table,
    Text,
    parse_blocks,
    parse_inline,
    plain_text,
)

__all__ = ["StyleRange", "markdown_to_plain", "markdown_to_styled", "utf16_len"]

StyleRange = tuple[int, int, str]  # (start, length, style), both counted in UTF-16 units


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units (what Telegram and Signal count)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


@dataclass(slots=True)
class _StyledText:
    """Text under construction with UTF-16 style ranges; quote prefixes added per line."""

    parts: list[str] = field(default_factory=list)
    units: int = 0
    ranges: list[StyleRange] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    at_line_start: bool = True

    def add(self, text: str) -> None:
        for index, line in enumerate(text.split("\n")):
            if index:
                self._raw("\n")
                self.at_line_start = True
            if line:
                self._line_prefix()
                self._raw(line)

    def mark(self) -> int:
        """Where a styled span starts: after the quote prefix of the line it starts on."""
        if not self.at_line_start or not self.prefixes:
            return self.units
        self._line_prefix()
        return self.units

    def _line_prefix(self) -> None:
        if self.at_line_start and self.prefixes:
            self._raw("".join(self.prefixes))
        self.at_line_start = False

    def newline(self) -> None:
        if self.at_line_start and self.prefixes:
            self._raw("".join(prefix.rstrip() for prefix in self.prefixes))
        self._raw("\n")
        self.at_line_start = True

    def _raw(self, text: str) -> None:
        self.parts.append(text)
        self.units += utf16_len(text)

    def style(self, start: int, style: str) -> None:
        if self.units > start:
            self.ranges.append((start, self.units - start, style))

    def text(self) -> str:
        return "".join(self.parts)


_STYLES = {"b": "BOLD", "i": "ITALIC", "s": "STRIKETHROUGH"}


def markdown_to_styled(md: str) -> tuple[str, list[StyleRange]]:
    """Plain text and its style ranges, sorted by start, longest first; may raise on a bug."""
    out = _StyledText()
    _styled_blocks(out, parse_blocks(md))
    return out.text(), sorted(out.ranges, key=lambda item: (item[0], -item[1], item[2]))


def markdown_to_plain(md: str) -> str:
    """Markdown as plain text; may raise on a bug (see `channels.formatting.render_plain`)."""
    out = _StyledText()
    _styled_blocks(out, parse_blocks(md))
    return out.text()


def _styled_blocks(out: _StyledText, blocks: list[Block]) -> None:
    for number, block in enumerate(blocks):
        if number:
            out.newline()
        if isinstance(block, Paragraph):
            _styled_inline(out, parse_inline(block.text), frozenset())
        elif isinstance(block, Heading):
            start = out.mark()
            _styled_inline(out, parse_inline(block.text), frozenset({"b"}))
            out.style(start, "BOLD")
        elif isinstance(block, Item):
            out.add(block.prefix)
            _styled_inline(out, parse_inline(block.text), frozenset())
        elif isinstance(block, CodeBlock | Table):
            start = out.mark()
            out.add(block.body if isinstance(block, CodeBlock) else block.text)
            out.style(start, "MONOSPACE")
        elif isinstance(block, Rule):
            out.add(RULE_TEXT)
        elif isinstance(block, Quote):
            out.prefixes.append(">" + block.separator)
            _styled_blocks(out, block.blocks)
            out.prefixes.pop()


def _styled_inline(out: _StyledText, nodes: list[Inline], active: frozenset[str]) -> None:
    for node in nodes:
        if isinstance(node, Text | SlackToken):
            out.add(node.text)
        elif isinstance(node, Code):
            start = out.mark()
            out.add(node.text)
            out.style(start, "MONOSPACE")
        elif isinstance(node, Emphasis):
            start = out.mark()
            _styled_inline(out, node.children, active | {node.style})
            if node.style not in active:
                out.style(start, _STYLES[node.style])
        elif isinstance(node, Link):
            text = plain_text(node.children)
            if not text.strip() or text == node.url:
                out.add(node.url)
            else:
                _styled_inline(out, node.children, active)
                out.add(f" ({node.url})")
