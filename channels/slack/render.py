"""Markdown rendered as Slack mrkdwn: markers, `<url|text>` links, escaping, mention tokens.

Owns `render_slack_mrkdwn`, the entry point the Slack adapter calls (never raises: a bug falls
back to escaped text through `channels.formatting.render_safely`), Slack's escaping (`&`, `<`,
`>`), and keeps a code block's backticks from ending it early.
"""

from __future__ import annotations

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
    plain_text,
)


def escape_slack(text: str) -> str:
    """`text` with `&`, `<`, `>` escaped for Slack mrkdwn."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_BROKEN_FENCE = "``\u200b`"  # keeps a ``` inside code from ending Slack's code block
_SLACK_MARKERS = {"b": "*", "i": "_", "s": "~"}


def render_slack_mrkdwn(md: str) -> str:
    """Markdown as Slack mrkdwn: `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ``` blocks
    (no language), `<url|text>` links, headings as bold lines.

    `&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;` everywhere except in the link brackets
    themselves (inside a link's URL and text they are escaped too, `|` in a URL becomes
    `%7C`). Slack mention tokens the model copied (`<@U123>`, `<#C123>`, `<!here>`) are kept.
    For `n` characters of Markdown the result is at most `5 * n` characters (`&` becomes
    `&amp;`), what users see at most `n`; Slack accepts 40,000 characters per message.
    """
    return render_safely(markdown_to_slack_mrkdwn, md, lambda: escape_slack(md))


def markdown_to_slack_mrkdwn(md: str) -> str:
    """Markdown as Slack mrkdwn; may raise on a bug (see `render_slack_mrkdwn`)."""
    return "\n".join(_slack_blocks(parse_blocks(md)))


def _slack_blocks(blocks: list[Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Blank):
            out.append("")
        elif isinstance(block, Paragraph):
            out.append(_slack_inline(parse_inline(block.text), frozenset()))
        elif isinstance(block, Heading):
            inner = _slack_inline(parse_inline(block.text), frozenset({"b"}))
            out.append(f"*{inner}*" if inner.strip() else inner)
        elif isinstance(block, Item):
            out.append(
                escape_slack(block.prefix) + _slack_inline(parse_inline(block.text), frozenset())
            )
        elif isinstance(block, CodeBlock | Table):
            body = block.body if isinstance(block, CodeBlock) else block.text
            if body:
                out.append(f"```\n{escape_slack(body).replace('```', _BROKEN_FENCE)}\n```")
        elif isinstance(block, Rule):
            out.append(RULE_TEXT)
        elif isinstance(block, Quote):
            inner = "\n".join(_slack_blocks(block.blocks))
            out.append("\n".join(f"> {line}" if line else ">" for line in inner.split("\n")))
    return out


def _slack_inline(nodes: list[Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text):
            parts.append(escape_slack(node.text))
        elif isinstance(node, SlackToken):
            parts.append(node.text)
        elif isinstance(node, Code):
            if node.text.strip("`"):
                parts.append(f"`{escape_slack(node.text.replace('`', 'ˋ'))}`")
            else:
                parts.append(escape_slack(node.text))
        elif isinstance(node, Emphasis):
            inner = _slack_inline(node.children, active | {node.style})
            marker = _SLACK_MARKERS[node.style]
            if node.style in active or not inner.strip():
                parts.append(inner)
            else:
                parts.append(f"{marker}{inner}{marker}")
        elif isinstance(node, Link):
            parts.append(_slack_link(node))
    return "".join(parts)


def _slack_link(link: Link) -> str:
    if not SAFE_LINK.fullmatch(link.url):
        return escape_slack(link_label(link))
    url = escape_slack(link.url).replace("|", "%7C")
    text = plain_text(link.children).replace("\n", " ")
    if not text.strip() or text == link.url:
        return f"<{url}>"
    return f"<{url}|{escape_slack(text)}>"
