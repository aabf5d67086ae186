"""Markdown rendered as Matrix HTML (`format: org.matrix.custom.html`) beside a plain body.

Owns `render_matrix`, which gives the event content's `body` (the Markdown as written: every
client shows it, and it is what Element itself sends) and `formatted_body`, built from the
tags the Matrix spec lists for clients to render: `<strong> <em> <del> <code> <pre>
<blockquote> <h1>-<h6> <a href> <hr> <br>`. Text is HTML-escaped everywhere; links other
than http(s) and mailto are shown as "text (url)". Never raises: a renderer bug falls back
to the escaped text (`channels.formatting.render_safely`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    Rule,
    SlackToken,
    Table,
    Text,
    link_label,
    parse_blocks,
    parse_inline,
)

HTML_FORMAT = "org.matrix.custom.html"
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_TAGS = {"b": "strong", "i": "em", "s": "del"}


@dataclass(frozen=True, slots=True)
class MatrixText:
    """A message's two forms: `body` for every client, `html` for those that render it."""

    body: str
    html: str

    def content(self, msgtype: str = "m.text") -> dict[str, str]:
        return {
            "msgtype": msgtype,
            "body": self.body,
            "format": HTML_FORMAT,
            "formatted_body": self.html,
        }


def escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_matrix(md: str) -> MatrixText:
    """`md` as a Matrix message: the Markdown as body, well-formed HTML beside it."""
    html = render_safely(markdown_to_matrix_html, md, lambda: _lines(escape_html(md)))
    return MatrixText(md, html)


def markdown_to_matrix_html(md: str) -> str:
    """Markdown as Matrix HTML; may raise on a bug (see `render_matrix`)."""
    return _blocks(parse_blocks(md))


def _lines(text: str) -> str:
    return text.replace("\n", "<br>")


def _blocks(blocks: list[Block]) -> str:
    """Blocks joined so that consecutive lines of text break with `<br>` and block elements
    (headings, code, quotes, rules) stand alone."""
    out: list[str] = []
    inline_before = False
    for block in blocks:
        if isinstance(block, Blank) and not inline_before:
            continue  # a block element already stands apart
        html, inline = _block(block)
        if inline and inline_before:
            out.append("<br>")
        out.append(html)
        inline_before = inline
    return "".join(out)


def _block(block: Block) -> tuple[str, bool]:
    """One block's HTML, and whether it is a line of text (True) or a block element."""
    if isinstance(block, Blank):
        return "", True
    if isinstance(block, Paragraph):
        return _lines(_inline(parse_inline(block.text), frozenset())), True
    if isinstance(block, Heading):
        level = min(max(block.level, 1), 6)
        return f"<h{level}>{_inline(parse_inline(block.text), frozenset())}</h{level}>", False
    if isinstance(block, Item):
        return escape_html(block.prefix) + _inline(parse_inline(block.text), frozenset()), True
    if isinstance(block, CodeBlock | Table):
        return _code_block(block), False
    if isinstance(block, Rule):
        return "<hr>", False
    inner = _blocks(block.blocks)  # a Quote
    return (f"<blockquote>{inner}</blockquote>" if inner.strip() else ""), False


def _code_block(block: CodeBlock | Table) -> str:
    body = block.body if isinstance(block, CodeBlock) else block.text
    escaped = escape_html(body)
    language = block.language if isinstance(block, CodeBlock) else ""
    if _LANGUAGE.fullmatch(language):
        return f'<pre><code class="language-{language}">{escaped}</code></pre>'
    return f"<pre><code>{escaped}</code></pre>"


def _inline(nodes: list[Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text | SlackToken):
            parts.append(escape_html(node.text))
        elif isinstance(node, Code):
            parts.append(f"<code>{escape_html(node.text)}</code>" if node.text else "")
        elif isinstance(node, Emphasis):
            inner = _inline(node.children, active | {node.style})
            tag = _TAGS[node.style]
            parts.append(inner if node.style in active or not inner else f"<{tag}>{inner}</{tag}>")
        elif isinstance(node, Link):
            inner = _inline(node.children, active | {"a"})
            safe = SAFE_LINK.fullmatch(node.url) and not node.url.lower().startswith("tg:")
            if "a" in active:
                parts.append(inner)
            elif not safe:
                parts.append(escape_html(link_label(node)))
            else:
                href = escape_html(node.url).replace('"', "&quot;")
                parts.append(f'<a href="{href}">{inner if inner.strip() else href}</a>')
    return "".join(parts)
