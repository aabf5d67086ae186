"""A persona file as the model reads it: the template's guidance for owners left out.

The workspace templates (`bootstrap/*.md`) carry `<!-- ... -->` comments written for the
owner: how to fill the file in, what belongs where. They mean nothing to the model and cost
tokens in every request, so `clean_persona(text)` removes them, with what they leave empty:
a line that held only a comment, a list item whose value was a comment (`- **Name:** <!--
what to call you -->`), then headings with nothing under them before the next heading of
the same or a higher level. A file of empty headings comes back "". The same text always
gives the same result, byte for byte (it sits in the cached part of the prompt).
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_EMPTY_ITEM = re.compile(r"^\s*(?:[-*+]\s*)?(?:\*\*[^*\n]*\*\*|__[^_\n]*__)?\s*:?\s*$")
_HEADING = re.compile(r"^(#{1,6})\s")
_HOLE = "\x00"  # where a comment stood, while its line is judged


def clean_persona(text: str) -> str:
    """`text` without template comments and the empty lines and headings they leave."""
    if "<!--" not in text:
        return text.strip()
    lines = _COMMENT.sub(_HOLE, text.replace(_HOLE, "")).split("\n")
    kept = [
        line.replace(_HOLE, "")
        for line in lines
        if _HOLE not in line or not _EMPTY_ITEM.match(line.replace(_HOLE, ""))
    ]
    cleaned = "\n".join(_without_empty_sections(_squeezed(kept))).strip()
    return clean_persona(cleaned) if "<!--" in cleaned else cleaned  # `<!<!-- -->--`


def _squeezed(lines: list[str]) -> list[str]:
    """Runs of blank lines made one."""
    out: list[str] = []
    for line in lines:
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line.rstrip())
    return out


def _without_empty_sections(lines: list[str]) -> list[str]:
    """Headings followed by nothing but blank lines up to a heading of the same or a higher
    level (or the end) dropped, innermost first."""
    out: list[str] = []
    for line in reversed(lines):
        heading = _HEADING.match(line)
        if heading is not None:
            level = len(heading.group(1))
            following = next((x for x in reversed(out) if x.strip()), None)
            nested = following is not None and (h := _HEADING.match(following)) is not None
            if following is None or (nested and len(h.group(1)) <= level):  # type: ignore[union-attr]
                continue
        out.append(line)
    return _squeezed(out[::-1])
