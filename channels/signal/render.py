"""Markdown rendered as Signal text: plain text plus signal-cli text styles.

Owns `render_signal_text`, the entry point the Signal adapter calls; the text and its style
ranges come from `channels.styled_text`, the never-raise fallback from `channels.formatting`.
"""

from __future__ import annotations

from channels.formatting import render_safely
from channels.styled_text import markdown_to_styled


def render_signal_text(md: str) -> tuple[str, list[str]]:
    """Markdown as plain text plus signal-cli text styles `"start:length:STYLE"`.

    STYLE is one of BOLD, ITALIC, STRIKETHROUGH, MONOSPACE (SPOILER is never produced);
    `start` and `length` count UTF-16 code units, as signal-cli does. Styles may nest and are
    sorted by start, longest first. The text is at most as many characters as `md`.
    """
    return render_safely(markdown_to_signal_text, md, lambda: (md, []))


def markdown_to_signal_text(md: str) -> tuple[str, list[str]]:
    """Text and signal-cli styles; may raise on a bug (see `render_signal_text`)."""
    text, ranges = markdown_to_styled(md)
    return text, [f"{start}:{length}:{style}" for start, length, style in ranges]
