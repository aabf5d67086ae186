"""HTML to readable text for `web_fetch`: headings as `#`, list items as `-`, links as
`text (url)`; scripts, styles and navigation dropped."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

_SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "nav", "iframe", "object", "canvas"}
)
_BLOCK_TAGS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "table",
        "tr",
        "pre",
        "blockquote",
        "figure",
        "figcaption",
        "form",
        "hr",
        "address",
        "details",
        "summary",
        "body",
        "html",
        "fieldset",
        "caption",
    }
)
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_RUNS = re.compile(r"\n{3,}")


class _TextExtractor(HTMLParser):
    """Readable text from HTML: headings as `#`, list items as `-`, links as `text (url)`."""

    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base_url = base_url
        self.title_parts: list[str] = []
        self._out: list[str] = []
        self._skip = 0
        self._in_title = False
        self._pre = 0
        self._links: list[tuple[str | None, int]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif self._skip:
            return
        elif tag in _HEADINGS:
            self._out.append("\n\n" + "#" * _HEADINGS[tag] + " ")
        elif tag == "li":
            self._out.append("\n- ")
        elif tag == "br":
            self._out.append("\n")
        elif tag in ("td", "th"):
            self._out.append(" ")
        elif tag == "a":
            href = dict(attrs).get("href")
            self._links.append((href, len(self._out)))
        elif tag in _BLOCK_TAGS:
            self._out.append("\n\n" if tag in ("p", "pre", "blockquote", "table") else "\n")
            if tag == "pre":
                self._pre += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
        elif self._skip:
            return
        elif tag in _HEADINGS:
            self._out.append("\n\n")
        elif tag == "a" and self._links:
            href, start = self._links.pop()
            self._close_link(href, start)
        elif tag in _BLOCK_TAGS:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            self._out.append("\n\n" if tag in ("p", "pre", "blockquote", "table") else "\n")

    def _close_link(self, href: str | None, start: int) -> None:
        if not href or href.startswith("#"):
            return
        target = urljoin(self.base_url, href.strip())
        if not target.startswith(("http://", "https://")):
            return
        text = " ".join("".join(self._out[start:]).split())
        if text and text != target:
            self._out.append(f" ({target})")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        elif self._skip:
            return
        elif self._pre:
            self._out.append(data.replace("\n", "\x00"))
        else:
            self._out.append(re.sub(r"\s+", " ", data))

    @property
    def title(self) -> str:
        return " ".join("".join(self.title_parts).split())

    def text(self) -> str:
        lines = []
        for line in "".join(self._out).split("\n"):
            if "\x00" in line:
                lines.extend(line.split("\x00"))
            else:
                lines.append(_SPACES.sub(" ", line).strip())
        return _BLANK_RUNS.sub("\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, base_url: str = "") -> tuple[str, str]:
    """(title, readable text) of an HTML document; scripts, styles and navigation dropped."""
    parser = _TextExtractor(base_url)
    parser.feed(html)
    parser.close()
    return parser.title, parser.text()
