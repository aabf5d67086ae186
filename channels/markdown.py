"""Claude's Markdown read into blocks and inline spans: the one reader every renderer shares.

Owns the block reader (paragraphs, headings, code, quotes, lists, tables, rules); the inline
parser (emphasis, code spans, links) is `channels.markdown_inline`, re-exported here so
renderers import everything from this module. Code fences are read by `markup.fences` (the
reader the chunker and the sanitizer use too), here applied to the top level and to each
block quote's content; lines end at "\n" only. Pure; renders nothing.

What is understood: paragraphs, `**bold**`/`__bold__`, `*italic*`/`_italic_`, `~~strike~~`,
`` `code` `` (any number of backticks), fenced code blocks with a language, `[text](url)`,
`<https://autolinks>`, images (as links), headings `#`..`######` (bold lines), bullet,
numbered and task lists (kept as text with "•", the number, "☐"/"☑"), `>` blockquotes,
tables (kept verbatim, monospace), rules (`———`), backslash escapes. Emphasis follows the
flanking rules, plus one rule of ours: a `*` run inside a word (`2*3*4`, `x**2`) is literal
like `_` is (`snake_case_name`). Unmatched markers stay literal text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from channels.markdown_inline import (
    SAFE_LINK,
    Code,
    Emphasis,
    Inline,
    Link,
    SlackToken,
    Text,
    link_label,
    parse_inline,
    plain_text,
)
from markup.fences import parse_fence

__all__ = [
    "RULE_TEXT",
    "SAFE_LINK",
    "Blank",
    "Block",
    "Code",
    "CodeBlock",
    "Emphasis",
    "Heading",
    "Inline",
    "Item",
    "Link",
    "Paragraph",
    "Quote",
    "Rule",
    "SlackToken",
    "Table",
    "Text",
    "link_label",
    "parse_blocks",
    "parse_inline",
    "plain_text",
]

_MAX_QUOTE_DEPTH = 8
RULE_TEXT = "———"  # what every renderer shows for a horizontal rule
# the link schemes renderers may make clickable

_HEADING = re.compile(r"[ \t]{0,3}(#{1,6})(?:[ \t]+(.*))?")
_HEADING_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_RULE = re.compile(r"[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_BULLET = re.compile(r"([ \t]*)[-*+][ \t]+(\S.*)")
_ORDERED = re.compile(r"([ \t]*)(\d{1,9}[.)])[ \t]+(\S.*)")
_TASK = re.compile(r"\[([ xX])\][ \t]+(\S.*)")
_QUOTE = re.compile(r"[ \t]{0,3}>")
_TABLE_SEPARATOR = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")


# -- blocks --


@dataclass(slots=True)
class Paragraph:
    text: str


@dataclass(slots=True)
class Heading:
    text: str
    level: int = 1  # the number of `#`s it was written with (1-6)


@dataclass(slots=True)
class CodeBlock:
    language: str
    body: str


@dataclass(slots=True)
class Quote:
    blocks: list[Block]
    separator: str  # " " when every quoted line had a space after ">", else ""


@dataclass(slots=True)
class Item:
    prefix: str  # indentation + "• " / "3. " / "☐ "
    text: str


@dataclass(slots=True)
class Table:
    text: str


@dataclass(slots=True)
class Rule:
    pass


@dataclass(slots=True)
class Blank:
    pass


Block = Paragraph | Heading | CodeBlock | Quote | Item | Table | Rule | Blank


def parse_blocks(md: str, depth: int = 0) -> list[Block]:
    """The blocks of `md`, blank runs collapsed to one `Blank` and none at the end."""
    lines = md.replace("\r\n", "\n").split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            if blocks and not isinstance(blocks[-1], Blank):
                blocks.append(Blank())
            index += 1
            continue
        fence = parse_fence(line)
        if fence is not None:
            body: list[str] = []
            index += 1
            while index < len(lines) and not fence.closes(lines[index]):
                body.append(_dedent(lines[index], len(fence.indent)))
                index += 1
            index += 1  # the closing line (or past the end)
            blocks.append(CodeBlock(fence.language, "\n".join(body)))
            continue
        if depth < _MAX_QUOTE_DEPTH and _QUOTE.match(line):
            quoted: list[str] = []
            spaced = True
            while index < len(lines) and _QUOTE.match(lines[index]):
                rest = lines[index].lstrip(" \t")[1:]
                if rest.startswith(" "):
                    rest = rest[1:]
                elif rest.strip():
                    spaced = False
                quoted.append(rest)
                index += 1
            inner = parse_blocks("\n".join(quoted), depth + 1)
            blocks.append(Quote(inner, " " if spaced else ""))
            continue
        if _starts_table(lines, index):
            table: list[str] = []
            while index < len(lines) and _table_row(lines[index]):
                table.append(lines[index].rstrip())
                index += 1
            blocks.append(Table("\n".join(table)))
            continue
        single = _single_line_block(line)
        if single is not None:
            blocks.append(single)
            index += 1
            continue
        paragraph = [line.rstrip()]
        index += 1
        while index < len(lines) and not _interrupts(lines, index, depth):
            paragraph.append(lines[index].rstrip())
            index += 1
        blocks.append(Paragraph("\n".join(paragraph)))
    while blocks and isinstance(blocks[-1], Blank):
        blocks.pop()
    return blocks


def _single_line_block(line: str) -> Block | None:
    heading = _HEADING.fullmatch(line)
    if heading is not None:
        text = _HEADING_CLOSE.sub("", heading.group(2) or "").strip()
        return Heading(text, len(heading.group(1)))
    if _RULE.fullmatch(line):
        return Rule()
    bullet = _BULLET.fullmatch(line)
    if bullet is not None:
        indent, text = bullet.groups()
        task = _TASK.fullmatch(text)
        if task is not None:
            return Item(f"{indent}{'☐' if task.group(1) == ' ' else '☑'} ", task.group(2))
        return Item(f"{indent}• ", text)
    ordered = _ORDERED.fullmatch(line)
    if ordered is not None:
        indent, number, text = ordered.groups()
        return Item(f"{indent}{number} ", text)
    return None


def _interrupts(lines: list[str], index: int, depth: int) -> bool:
    line = lines[index]
    return (
        not line.strip()
        or parse_fence(line) is not None
        or (depth < _MAX_QUOTE_DEPTH and _QUOTE.match(line) is not None)
        or _starts_table(lines, index)
        or _single_line_block(line) is not None
    )


def _table_row(line: str) -> bool:
    """True for a line that continues a table: a blank line or a fence ends it."""
    return "|" in line and bool(line.strip()) and parse_fence(line) is None


def _starts_table(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and "|" in lines[index]
        and "|" in lines[index + 1]
        and _TABLE_SEPARATOR.fullmatch(lines[index + 1]) is not None
    )


def _dedent(line: str, width: int) -> str:
    removable = len(line) - len(line.lstrip(" "))
    return line[min(width, removable) :]
