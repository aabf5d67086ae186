"""Rendering Claude's Markdown for each platform: Telegram HTML, Slack mrkdwn, Signal styles.

Owns the entry points adapters call. Each wraps one renderer (`channels.telegram.render`,
`channels.slack.render`, `channels.signal.render`, all reading with `channels.markdown`) so it
never raises: a bug falls back to escaped plain text and logs the exception type, never the text.

Size after rendering, for one chunk of `n` characters (code points) of Markdown:
- `render_telegram_html`: the text Telegram counts (after parsing the entities) is at most
  `n` characters; the HTML tags themselves are not counted by Telegram;
- `render_signal_text` and `render_plain`: at most `n` characters;
- `render_slack_mrkdwn`: at most `5 * n` characters (`&` becomes `&amp;`), what users see at
  most `n`; Slack accepts 40,000 characters per message.
So adapters may split at the platform limit minus a small headroom (Telegram: split at 4000
for 4096). Platforms that count UTF-16 code units (Telegram, Signal) see astral characters
(most emoji) as two: check `utf16_len` when a chunk is emoji-heavy. An empty or
whitespace-only rendering means there is nothing to send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from channels.signal.render import markdown_to_plain, markdown_to_signal_text, utf16_len
from channels.slack.render import escape_slack, markdown_to_slack_mrkdwn
from channels.telegram.render import escape_html, markdown_to_telegram_html

__all__ = [
    "render_plain",
    "render_signal_text",
    "render_slack_mrkdwn",
    "render_telegram_html",
    "utf16_len",
]

log = logging.getLogger(__name__)


# -- public API --


def render_telegram_html(md: str) -> str:
    """Markdown as Telegram Bot API HTML (`parse_mode="HTML"`): well-formed for any input.

    Uses `<b> <i> <s> <code> <pre> <a href> <blockquote>`; `&`, `<`, `>` are escaped
    everywhere else. Code blocks keep their language (`<pre><code class="language-x">`),
    except inside a blockquote where they become `<code>` (Telegram nests little). Links with
    schemes other than http(s), mailto and tg are shown as "text (url)".
    """
    return _safely(markdown_to_telegram_html, md, lambda: escape_html(md))


def render_slack_mrkdwn(md: str) -> str:
    """Markdown as Slack mrkdwn: `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ``` blocks
    (no language), `<url|text>` links, headings as bold lines.

    `&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;` everywhere except in the link brackets
    themselves (inside a link's URL and text they are escaped too, `|` in a URL becomes
    `%7C`). Slack mention tokens the model copied (`<@U123>`, `<#C123>`, `<!here>`) are kept.
    """
    return _safely(markdown_to_slack_mrkdwn, md, lambda: escape_slack(md))


def render_signal_text(md: str) -> tuple[str, list[str]]:
    """Markdown as plain text plus signal-cli text styles `"start:length:STYLE"`.

    STYLE is one of BOLD, ITALIC, STRIKETHROUGH, MONOSPACE (SPOILER is never produced);
    `start` and `length` count UTF-16 code units, as signal-cli does. Styles may nest and are
    sorted by start, longest first.
    """
    return _safely(markdown_to_signal_text, md, lambda: (md, []))


def render_plain(md: str) -> str:
    """Markdown as plain text: markers removed, links as "text (url)"; the fallback to send
    when a platform rejects formatted text."""
    return _safely(markdown_to_plain, md, lambda: md)


_T = TypeVar("_T")


def _safely(render: Callable[[str], _T], md: str, fallback: Callable[[], _T]) -> _T:
    try:
        return render(md)
    except Exception as exc:  # a formatter bug must never lose a reply
        log.error(
            "formatting failed (%s) in %s; sending the text unformatted",
            type(exc).__name__,
            render.__name__,
        )
        return fallback()
