"""Markdown rendered as Telegram Bot API HTML (`parse_mode="HTML"`).

Owns `render_telegram_html`, the entry point the Telegram adapter calls (never raises: a bug
falls back to escaped text through `channels.formatting.render_safely`), the HTML escaping and
the nesting Telegram allows (no nested blockquotes or links, no code in links, no `<pre>` in a
blockquote).
"""

from __future__ import annotations

import re

from channels.formatting import render_safely
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
)

_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")


def escape_html(text: str) -> str:
    """`text` with `&`, `<`, `>` escaped for Telegram HTML."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_telegram_html(md: str) -> str:
    """Markdown as Telegram Bot API HTML (`parse_mode="HTML"`): well-formed for any input.

    Uses `<b> <i> <s> <code> <pre> <a href> <blockquote>`; `&`, `<`, `>` are escaped
    everywhere else. Code blocks keep their language (`<pre><code class="language-x">`),
    except inside a blockquote where they become `<code>` (Telegram nests little). Links with
    schemes other than http(s), mailto and tg are shown as "text (url)". For `n` characters
    of Markdown, the text Telegram counts (after parsing the entities; tags are not counted)
    is at most `n` characters, so the adapter splits at 4000 for Telegram's 4096.
    """
    return render_safely(markdown_to_telegram_html, md, lambda: escape_html(md))


def markdown_to_telegram_html(md: str) -> str:
    """Markdown as Telegram HTML; may raise on a bug (see `render_telegram_html`)."""
    return "\n".join(_telegram_blocks(parse_blocks(md), in_quote=False))


def _telegram_blocks(blocks: list[Block], *, in_quote: bool) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Blank):
            out.append("")
        elif isinstance(block, Paragraph):
            out.append(_telegram_inline(parse_inline(block.text), frozenset()))
        elif isinstance(block, Heading):
            inner = _telegram_inline(parse_inline(block.text), frozenset({"b"}))
            out.append(f"<b>{inner}</b>" if inner.strip() else inner)
        elif isinstance(block, Item):
            out.append(
                escape_html(block.prefix) + _telegram_inline(parse_inline(block.text), frozenset())
            )
        elif isinstance(block, CodeBlock | Table):
            out.append(_telegram_code_block(block, in_quote=in_quote))
        elif isinstance(block, Rule):
            out.append(RULE_TEXT)
        elif isinstance(block, Quote):
            inner = "\n".join(_telegram_blocks(block.blocks, in_quote=True))
            if in_quote or not inner.strip():
                out.append(inner)  # Telegram cannot nest blockquotes
            else:
                out.append(f"<blockquote>{inner}</blockquote>")
    return out


def _telegram_code_block(block: CodeBlock | Table, *, in_quote: bool) -> str:
    body = block.body if isinstance(block, CodeBlock) else block.text
    if not body:
        return ""
    escaped = escape_html(body)
    if in_quote:
        return f"<code>{escaped}</code>"
    language = block.language if isinstance(block, CodeBlock) else ""
    if _LANGUAGE.fullmatch(language):
        return f'<pre><code class="language-{language}">{escaped}</code></pre>'
    return f"<pre>{escaped}</pre>"


_TELEGRAM_TAGS = {"b": "b", "i": "i", "s": "s"}


def _telegram_inline(nodes: list[Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text | SlackToken):
            parts.append(escape_html(node.text))
        elif isinstance(node, Code):
            if "a" in active or not node.text:
                parts.append(escape_html(node.text))  # links cannot contain code
            else:
                parts.append(f"<code>{escape_html(node.text)}</code>")
        elif isinstance(node, Emphasis):
            inner = _telegram_inline(node.children, active | {node.style})
            tag = _TELEGRAM_TAGS[node.style]
            if node.style in active or not inner:
                parts.append(inner)
            else:
                parts.append(f"<{tag}>{inner}</{tag}>")
        elif isinstance(node, Link):
            inner = _telegram_inline(node.children, active | {"a"})
            if "a" in active or not SAFE_LINK.fullmatch(node.url):
                parts.append(escape_html(link_label(node)) if "a" not in active else inner)
            elif not inner.strip():
                parts.append(escape_html(node.url))
            else:
                href = escape_html(node.url).replace('"', "&quot;")
                parts.append(f'<a href="{href}">{inner}</a>')
    return "".join(parts)
