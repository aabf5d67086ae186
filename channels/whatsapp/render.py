"""Markdown rendered as WhatsApp text: `*bold*`, `_italic_`, `~strike~`, `` `code` ``,
```` ``` ```` monospace blocks, lists and `>` quotes as WhatsApp shows them.

Owns `render_whatsapp`, the entry point the adapter calls (never raises: a bug falls back to
the plain text through `channels.formatting.render_safely`). WhatsApp has no headings, tables
or link syntax: a heading becomes a bold line, a table a monospace block (its columns stay
aligned), a link "text (url)" (the URL alone when they are the same; WhatsApp links it).
"""

from __future__ import annotations

from channels.formatting import render_plain, render_safely
from channels.markdown import (
    RULE_TEXT,
    SAFE_LINK,
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

_MARKERS = {"b": "*", "i": "_", "s": "~"}
_FENCE = "```"
_BROKEN_FENCE = "``\u200b`"  # keeps a ``` inside code from ending the monospace block


def render_whatsapp(md: str) -> str:
    """Markdown as WhatsApp formatted text (see the module docstring). What users see is at
    most as long as `md` plus the URLs shown beside link texts."""
    return render_safely(markdown_to_whatsapp, md, lambda: render_plain(md))


def markdown_to_whatsapp(md: str) -> str:
    """Markdown as WhatsApp text; may raise on a bug (see `render_whatsapp`)."""
    return "\n".join(_blocks(parse_blocks(md)))


def _blocks(blocks: list[Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Blank):
            out.append("")
        elif isinstance(block, Paragraph):
            out.append(_inline(parse_inline(block.text), frozenset()))
        elif isinstance(block, Heading):
            inner = _inline(parse_inline(block.text), frozenset({"b"}))
            out.append(f"*{inner}*" if inner.strip() else inner)
        elif isinstance(block, Item):
            out.append(block.prefix + _inline(parse_inline(block.text), frozenset()))
        elif isinstance(block, CodeBlock | Table):
            body = block.body if isinstance(block, CodeBlock) else block.text
            if body:
                out.append(f"{_FENCE}{body.replace(_FENCE, _BROKEN_FENCE)}{_FENCE}")
        elif isinstance(block, Rule):
            out.append(RULE_TEXT)
        elif isinstance(block, Quote):
            inner = "\n".join(_blocks(block.blocks))
            out.append("\n".join(f"> {line}" if line else ">" for line in inner.split("\n")))
    return out


def _inline(nodes: list[Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text | SlackToken):
            parts.append(node.text)
        elif isinstance(node, Code):
            body = node.text.replace("`", "ˋ")
            parts.append(f"`{body}`" if body.strip() else node.text)
        elif isinstance(node, Emphasis):
            inner = _inline(node.children, active | {node.style})
            marker = _MARKERS[node.style]
            if node.style in active or not inner.strip() or inner != inner.strip():
                parts.append(inner)
            else:
                parts.append(f"{marker}{inner}{marker}")
        elif isinstance(node, Link):
            parts.append(_link(node))
    return "".join(parts)


def _link(link: Link) -> str:
    if not SAFE_LINK.fullmatch(link.url):
        return link_label(link)
    text = plain_text(link.children).replace("\n", " ").strip()
    if not text or text == link.url:
        return link.url
    return f"{text} ({link.url})"
