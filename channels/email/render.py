"""Markdown rendered as the simple HTML of a mail's text/html part.

Owns `render_email_html`: paragraphs, headings, `<strong> <em> <s> <code> <pre> <a href>
<blockquote> <hr>`, list items as lines, tables as preformatted text; everything else
escaped. Links go out only for http(s) and mailto targets. Never raises: a renderer bug
falls back to the escaped text in `<pre>` (`channels.formatting.render_safely`).
"""

from __future__ import annotations

import html

from channels.formatting import render_safely
from channels.markdown import (
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
)

_TAGS = {"b": "strong", "i": "em", "s": "s"}
_PAGE = (
    '<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head>\n'
    '<body style="font-family: sans-serif; line-height: 1.4">\n{}\n</body></html>\n'
)


def render_email_html(md: str) -> str:
    """A whole HTML document for the Markdown `md` (see the module docstring)."""
    body = render_safely(_blocks_html, md, lambda: f"<pre>{html.escape(md)}</pre>")
    return _PAGE.format(body)


def _blocks_html(md: str) -> str:
    return "\n".join(_blocks(parse_blocks(md)))


def _blocks(blocks: list[Block]) -> list[str]:
    out: list[str] = []
    items: list[str] = []

    def flush_items() -> None:
        if items:
            out.append("<p>" + "<br>\n".join(items) + "</p>")
            items.clear()

    for block in blocks:
        if isinstance(block, Item):
            items.append(html.escape(block.prefix) + _inline(parse_inline(block.text), False))
            continue
        flush_items()
        if isinstance(block, Paragraph):
            lines = block.text.split("\n")
            out.append(
                "<p>" + "<br>\n".join(_inline(parse_inline(x), False) for x in lines) + "</p>"
            )
        elif isinstance(block, Heading):
            out.append(f"<p><strong>{_inline(parse_inline(block.text), False)}</strong></p>")
        elif isinstance(block, CodeBlock | Table):
            body = block.body if isinstance(block, CodeBlock) else block.text
            out.append(f"<pre>{html.escape(body)}</pre>")
        elif isinstance(block, Rule):
            out.append("<hr>")
        elif isinstance(block, Quote):
            inner = "\n".join(_blocks(block.blocks))
            out.append(
                f'<blockquote style="border-left: 3px solid #ccc; padding-left: 8px">{inner}</blockquote>'
            )
        elif isinstance(block, Blank):
            continue
    flush_items()
    return out


def _inline(nodes: list[Inline], in_link: bool) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text | SlackToken):
            parts.append(html.escape(node.text))
        elif isinstance(node, Code):
            parts.append(f"<code>{html.escape(node.text)}</code>")
        elif isinstance(node, Emphasis):
            tag = _TAGS[node.style]
            parts.append(f"<{tag}>{_inline(node.children, in_link)}</{tag}>")
        elif isinstance(node, Link):
            inner = _inline(node.children, True)
            if in_link or not SAFE_LINK.fullmatch(node.url) or node.url.startswith("tg:"):
                parts.append(inner if in_link else html.escape(link_label(node)))
            else:
                href = html.escape(node.url, quote=True)
                parts.append(f'<a href="{href}">{inner or href}</a>')
    return "".join(parts)
