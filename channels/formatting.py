"""What every platform's rendering shares: the never-raise wrapper and the plain-text fallback.

Owns `render_safely` (a renderer bug falls back to unformatted text and logs the exception
type, never the text), `render_plain` (Markdown as plain text, what a platform gets when it
rejects formatted text) and `utf16_len`. Names no platform: each platform's renderer lives in
its own subpackage (`channels/<key>/render.py`), reading with `channels.markdown` and
wrapped by `render_safely`, and only its own adapter calls it.

Size after rendering, for one chunk of `n` characters (code points) of Markdown:
`render_plain` gives at most `n` characters; each platform renderer states its own bound. So
adapters may split at the platform limit minus a small headroom. Platforms that count UTF-16
code units see astral characters (most emoji) as two: check `utf16_len` when a chunk is
emoji-heavy. An empty or whitespace-only rendering means there is nothing to send.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from channels.styled_text import markdown_to_plain, utf16_len

__all__ = ["render_plain", "render_safely", "utf16_len"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def render_plain(md: str) -> str:
    """Markdown as plain text: markers removed, links as "text (url)"; the fallback to send
    when a platform rejects formatted text."""
    return render_safely(markdown_to_plain, md, lambda: md)


def render_safely(render: Callable[[str], _T], md: str, fallback: Callable[[], _T]) -> _T:
    """`render(md)`, or `fallback()` if the renderer raises: a formatter bug must never lose a
    reply. Logs the exception type and the renderer's name, never the text."""
    try:
        return render(md)
    except Exception as exc:
        log.error(
            "formatting failed (%s) in %s; sending the text unformatted",
            type(exc).__name__,
            render.__name__,
        )
        return fallback()
