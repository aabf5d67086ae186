"""A mail's words as the model should read them: HTML turned into text, quoted history and
signatures trimmed. Pure.

`html_to_text` keeps paragraphs, line breaks, list items and link targets, and drops
scripts, styles and the head. `trim_reply(text)` cuts what a person did not write now: the
quoted history below an attribution line ("On ... wrote:", "Am ... schrieb", Outlook's
"-----Original Message-----" or its "From: ... Sent: ..." block) or a trailing run of `>`
lines, and a signature below the "-- " separator. What remains is always a prefix of the
text (trailing blank lines removed); when trimming would leave nothing, the text is kept.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_BLOCKS = frozenset(
    [
        "p",
        "div",
        "br",
        "tr",
        "li",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "pre",
        "table",
        "ul",
        "ol",
        "hr",
        "section",
        "article",
    ]
)
_SKIPPED = frozenset({"script", "style", "head", "title"})
_ATTRIBUTION = re.compile(
    r"^\s*(on\b.{0,200}\bwrote:?|am\b.{0,200}\bschrieb\b.{0,40}:?|le\b.{0,200}\ba écrit\s*:?"
    r"|el\b.{0,200}\bescribió:?|-{2,}\s*original message\s*-{2,}|-{2,}\s*forwarded message\s*-{2,}"
    r"|_{5,})\s*$",
    re.IGNORECASE,
)
_OUTLOOK_FROM = re.compile(r"^\s*\*?from:\*?\s+\S", re.IGNORECASE)
_OUTLOOK_NEXT = re.compile(r"^\s*\*?(sent|date|to|subject):\*?\s", re.IGNORECASE)
_SIGNATURE = re.compile(r"^-- ?$")


class _TextOfHtml(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0
        self._href: list[str | None] = []
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skip += 1
        elif tag in _BLOCKS:
            self.parts.append("\n")
            if tag == "li":
                self.parts.append("• ")
            if tag == "pre":
                self._pre += 1
        elif tag == "a":
            self._href.append(dict(attrs).get("href"))

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n")
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
        elif tag == "a" and self._href:
            href = self._href.pop()
            if href and href.startswith(("http://", "https://")) and href not in self.parts[-1:]:
                self.parts.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Readable text of an HTML mail body (see the module docstring)."""
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    lines = [line.strip() for line in "".join(parser.parts).split("\n")]
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def trim_reply(text: str) -> str:
    """The part of a reply its writer wrote now (see the module docstring)."""
    lines = text.replace("\r\n", "\n").split("\n")
    end = _history_start(lines)
    end = _signature_start(lines[:end])
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    kept = "\n".join(lines[:end])
    return kept if kept.strip() else text.rstrip()


def _history_start(lines: list[str]) -> int:
    for index, line in enumerate(lines):
        if _ATTRIBUTION.match(line):
            return index
        if _OUTLOOK_FROM.match(line) and any(
            _OUTLOOK_NEXT.match(following) for following in lines[index + 1 : index + 4]
        ):
            return index
    end = len(lines)
    while end > 0 and (lines[end - 1].startswith(">") or not lines[end - 1].strip()):
        end -= 1
    # only a trailing quote is history; a quote with text below it is an inline answer
    return end if any(line.startswith(">") for line in lines[end:]) else len(lines)


def _signature_start(lines: list[str]) -> int:
    for index in range(len(lines) - 1, -1, -1):
        if _SIGNATURE.match(lines[index]):
            return index
    return len(lines)
