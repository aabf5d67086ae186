"""Markdown rendered as Discord's own Markdown dialect.

Owns what Discord shows differently from CommonMark: `__x__` is underline there (so bold is
always `**`), headings exist only at levels 1-3 (deeper ones become bold lines), quotes do not
nest, rules and tables do not render (a rule becomes `———`, a table an aligned code block),
and only http(s) links can be masked. What Discord has and CommonMark lacks passes through as
the model wrote it: `||spoilers||`, `-# subtext` lines, `<@id>`/`<#id>`/`<t:…>` tokens (sent
with pings switched off). Literal markers are escaped so they show as written, except inside
bare URLs, which Discord would break. `render_discord` never raises: a renderer bug falls back
to the escaped text.
"""

from __future__ import annotations

import logging
import re

from channels.formatting import render_safely
from channels.markdown import (
    RULE_TEXT,
    Blank,
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
    link_label,
    parse_blocks,
    parse_inline,
    plain_text,
)

log = logging.getLogger("channels.discord")

_MARKERS = {"b": "**", "i": "*", "s": "~~"}
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_BARE_URL = re.compile(r"https?://[^\s<>]+", re.IGNORECASE)
_MASKABLE = re.compile(r"https?://[^\s]+", re.IGNORECASE)
_BROKEN_FENCE = "``\u200b`"  # keeps a ``` inside code from ending Discord's code block
# Line starts Discord would read as markup although the model escaped them.
_LINE_MARKUP = re.compile(r"^(#{1,3}[ \t]|>[ \t]|>>>|[-+][ \t])")


def render_discord(md: str) -> str:
    """Markdown as Discord Markdown; never raises (see the module docstring)."""
    return render_safely(markdown_to_discord, md, lambda: escape_discord(md))


def markdown_to_discord(md: str) -> str:
    """Markdown as Discord Markdown; may raise on a bug (see `render_discord`)."""
    return "\n".join(_blocks(parse_blocks(md), quoted=False))


def escape_discord(text: str) -> str:
    """`text` with Discord's markup characters escaped, bare URLs left whole."""
    parts: list[str] = []
    position = 0
    for match in _BARE_URL.finditer(text):
        parts.append(_escape_plain(text[position : match.start()]))
        parts.append(match.group())
        position = match.end()
    parts.append(_escape_plain(text[position:]))
    return "".join(parts)


def _escape_plain(text: str) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        before = text[index - 1] if index else ""
        after = text[index + 1] if index + 1 < len(text) else ""
        if char in "\\*`":
            out.append("\\" + char)
        elif char == "_":
            inside_word = before.isalnum() and after.isalnum()
            out.append(char if inside_word else "\\_")
        elif char == "~" and "~" in (before, after):
            out.append("\\~")
        else:
            out.append(char)
    return "".join(out)


def _guard_lines(text: str) -> str:
    """Escape line starts that Discord would take for a heading, quote or list."""
    return "\n".join("\\" + line if _LINE_MARKUP.match(line) else line for line in text.split("\n"))


def _blocks(blocks: list[Block], *, quoted: bool) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Blank):
            out.append("")
        elif isinstance(block, Paragraph):
            out.append(_guard_lines(_inline(parse_inline(block.text), frozenset())))
        elif isinstance(block, Heading):
            out.append(_heading(block))
        elif isinstance(block, Item):
            marker = block.prefix.replace("•", "-", 1)
            out.append(marker + _inline(parse_inline(block.text), frozenset()))
        elif isinstance(block, CodeBlock):
            if block.body.strip():
                language = block.language if _LANGUAGE.fullmatch(block.language) else ""
                out.append(_fenced(block.body, language))
        elif isinstance(block, Table):
            out.append(_fenced(align_table(block.text), ""))
        elif isinstance(block, Rule):
            out.append(RULE_TEXT)
        elif isinstance(block, Quote):
            inner = "\n".join(_blocks(block.blocks, quoted=True))
            if quoted:
                out.append(inner)  # Discord does not nest quotes: one level shows them all
            else:
                out.append("\n".join(f"> {line}" for line in inner.split("\n")))
    return out


def _heading(block: Heading) -> str:
    if block.level <= 3:
        inner = _inline(parse_inline(block.text), frozenset())
        return f"{'#' * block.level} {inner}" if inner.strip() else inner
    inner = _inline(parse_inline(block.text), frozenset({"b"}))
    return f"**{inner}**" if inner.strip() else inner


def _fenced(body: str, language: str) -> str:
    return f"```{language}\n{body.replace('```', _BROKEN_FENCE)}\n```"


def align_table(table: str) -> str:
    """A Markdown table as plain columns padded to equal width, its separator row redrawn."""
    rows: list[list[str]] = []
    for number, source in enumerate(table.split("\n")):
        if number == 1:
            continue  # the |---|---| row
        cells = source.strip().replace("\\|", "\x00")
        cells = cells.removeprefix("|").removesuffix("|")
        rows.append([cell.strip().replace("\x00", "|") for cell in cells.split("|")])
    width = max(len(row) for row in rows)
    rows = [row + [""] * (width - len(row)) for row in rows]
    sizes = [max(len(row[column]) for row in rows) for column in range(width)]

    def line(row: list[str]) -> str:
        return " | ".join(cell.ljust(size) for cell, size in zip(row, sizes, strict=True)).rstrip()

    rule = "-+-".join("-" * size for size in sizes)
    return "\n".join([line(rows[0]), rule, *(line(row) for row in rows[1:])])


def _inline(nodes: list[Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(escape_discord(node.text))
        elif isinstance(node, SlackToken):
            parts.append(node.text)
        elif isinstance(node, Code):
            parts.append(_code_span(node.text))
        elif isinstance(node, Emphasis):
            parts.append(_emphasis(node, active))
        elif isinstance(node, Link):
            parts.append(_link(node, active))
    return "".join(parts)


def _code_span(text: str) -> str:
    if not text.strip():
        return escape_discord(text)
    if "`" not in text:
        return f"`{text}`"
    if "``" not in text:
        return f"`` {text} ``"
    return f"`{text.replace('`', 'ˋ')}`"


def _emphasis(node: Emphasis, active: frozenset[str]) -> str:
    inner = _inline(node.children, active | {node.style})
    if node.style in active or not inner.strip():
        return inner
    # Discord wants the markers against the text: move surrounding spaces outside.
    core = inner.strip()
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()) :]
    marker = _MARKERS[node.style]
    return f"{lead}{marker}{core}{marker}{trail}"


def _link(link: Link, active: frozenset[str]) -> str:
    label = plain_text(link.children)
    if not _MASKABLE.fullmatch(link.url):
        return escape_discord(link_label(link))
    if not label.strip() or label == link.url:
        return link.url
    text = _inline(link.children, active).replace("[", "\\[").replace("]", "\\]")
    url = link.url.replace("(", "%28").replace(")", "%29")
    return f"[{text}]({url})"
