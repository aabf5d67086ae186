"""Claude's Markdown inline spans: emphasis, code spans, links, Slack tokens, bare URLs.

Owns `parse_inline` (emphasis by CommonMark's flanking rules plus one rule of ours: a `*` run
inside a word is literal like `_` is; code spans with any number of backticks; links, autolinks
and images as links; backslash escapes) and the helpers renderers use on its output
(`plain_text`, `link_label`). Pure; renders nothing. `channels.markdown` reads blocks and
re-exports these names, so renderers import from one place.
"""

from __future__ import annotations

import re
import string
import unicodedata
from bisect import bisect_left
from dataclasses import dataclass, field

_MAX_EMPHASIS_DEPTH = 16
_MAX_LINK_TEXT = 1000
SAFE_LINK = re.compile(r"(?:https?://|mailto:|tg://)[^\s]+", re.IGNORECASE)
_ESCAPABLE = frozenset(string.punctuation)

_AUTOLINK = re.compile(r"<((?:https?|mailto|tg):[^\s<>]+)>", re.IGNORECASE)
_SLACK_TOKEN = re.compile(
    r"<(?:@[UW][A-Z0-9]{2,}|#C[A-Z0-9]{2,}(?:\|[^<>\s|]{1,80})?|!here|!channel|!everyone"
    r"|!subteam\^[A-Z0-9]{2,})>"
)
_BARE_URL = re.compile(r"https?://[^\s<>`\"]+", re.IGNORECASE)
_URL_TRAILER = ".,;:!?'\"*_~"
_LINK_TAIL = re.compile(
    r"\(\s*(<[^<>\n]*>|[^\s()<>]*(?:\([^\s()<>]*\)[^\s()<>]*)*)"
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"
)
_BACKTICKS = re.compile(r"`+")


# -- inline spans --


@dataclass(slots=True)
class Text:
    text: str


@dataclass(slots=True)
class Code:
    text: str


@dataclass(slots=True)
class Link:
    children: list[Inline]
    url: str


@dataclass(slots=True)
class Emphasis:
    style: str  # "b", "i" or "s"
    children: list[Inline]
    depth: int


@dataclass(slots=True)
class SlackToken:
    text: str


@dataclass(slots=True)
class _Delimiter:
    char: str
    count: int
    run: int
    can_open: bool
    can_close: bool


Inline = Text | Code | Link | Emphasis | SlackToken
_Node = Inline | _Delimiter


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"


@dataclass(slots=True)
class _InlineParser:
    source: str
    allow_links: bool = True
    nodes: list[_Node] = field(default_factory=list)
    buffer: list[str] = field(default_factory=list)
    closing_runs: dict[int, list[int]] = field(default_factory=dict)
    brackets: dict[int, int] = field(default_factory=dict)

    def parse(self) -> list[Inline]:
        source = self.source
        for match in _BACKTICKS.finditer(source):
            self.closing_runs.setdefault(len(match.group()), []).append(match.start())
        if self.allow_links:
            self.brackets = _match_brackets(source)
        index = 0
        while index < len(source):
            index = self._step(index)
        self._flush()
        return _resolve_emphasis(self.nodes)

    def _flush(self) -> None:
        if self.buffer:
            self.nodes.append(Text("".join(self.buffer)))
            self.buffer.clear()

    def _emit(self, node: _Node) -> None:
        self._flush()
        self.nodes.append(node)

    def _step(self, index: int) -> int:
        source = self.source
        char = source[index]
        if char == "\\" and index + 1 < len(source) and source[index + 1] in _ESCAPABLE:
            self.buffer.append(source[index + 1])
            return index + 2
        if char == "`":
            return self._code_span(index)
        if char == "<":
            token = _SLACK_TOKEN.match(source, index)
            if token is not None:
                self._emit(SlackToken(token.group()))
                return token.end()
            auto = _AUTOLINK.match(source, index) if self.allow_links else None
            if auto is not None:
                self._emit(Link([Text(auto.group(1))], auto.group(1)))
                return auto.end()
        if self.allow_links and (
            char == "[" or (char == "!" and source[index + 1 : index + 2] == "[")
        ):
            end = self._link(index + (char == "!"))
            if end is not None:
                return end
        if char in "hH" and (index == 0 or not source[index - 1].isalnum()):
            url = _bare_url(source, index)
            if url:
                self._emit(Text(url))  # its own node: no emphasis inside a URL
                return index + len(url)
        if char in "*_~":
            return self._delimiter_run(index)
        self.buffer.append(char)
        return index + 1

    def _code_span(self, index: int) -> int:
        source = self.source
        run = 0
        while index + run < len(source) and source[index + run] == "`":
            run += 1
        starts = self.closing_runs.get(run, [])
        found = bisect_left(starts, index + run)
        if found < len(starts):
            start = starts[found]
            content = source[index + run : start].replace("\n", " ")
            if len(content) > 2 and content[0] == content[-1] == " " and content.strip():
                content = content[1:-1]
            self._emit(Code(content))
            return start + run
        self.buffer.append("`" * run)
        return index + run

    def _link(self, bracket: int) -> int | None:
        source = self.source
        close = self.brackets.get(bracket)
        if close is None or close - bracket > _MAX_LINK_TEXT:
            return None
        tail = _LINK_TAIL.match(source, close + 1)
        if tail is None:
            return None
        url = tail.group(1).strip("<>")
        children = _InlineParser(source[bracket + 1 : close], allow_links=False).parse()
        self._emit(Link(children, url))
        return tail.end()

    def _delimiter_run(self, index: int) -> int:
        source = self.source
        char = source[index]
        end = index
        while end < len(source) and source[end] == char:
            end += 1
        run = end - index
        before = source[index - 1] if index > 0 else " "
        after = source[end] if end < len(source) else " "
        left = not after.isspace() and (
            not _is_punctuation(after) or before.isspace() or _is_punctuation(before)
        )
        right = not before.isspace() and (
            not _is_punctuation(before) or after.isspace() or _is_punctuation(after)
        )
        if char == "_":
            can_open = left and (not right or _is_punctuation(before))
            can_close = right and (not left or _is_punctuation(after))
        elif char == "*":
            intraword = left and right  # 2*3*4, x**2: literal, like snake_case
            can_open, can_close = left and not intraword, right and not intraword
        else:  # "~": only "~~" strikes, so "~5 min" and "~~~" stay text
            can_open, can_close = (left, right) if run == 2 else (False, False)
        if can_open or can_close:
            self._emit(_Delimiter(char, run, run, can_open, can_close))
        else:
            self.buffer.append(char * run)
        return end


def parse_inline(text: str) -> list[Inline]:
    """The inline spans of one block's text; unmatched markers stay `Text`."""
    return _InlineParser(text).parse()


def _bare_url(source: str, index: int) -> str:
    match = _BARE_URL.match(source, index)
    if match is None:
        return ""
    url = match.group()
    while url:
        unbalanced = url[-1] == ")" and url.count(")") > url.count("(")
        if url[-1] in _URL_TRAILER or unbalanced:
            url = url[:-1]
        else:
            break
    return url if len(url) > len("https://") else ""


def _match_brackets(source: str) -> dict[int, int]:
    pairs: dict[int, int] = {}
    stack: list[int] = []
    index = 0
    while index < len(source):
        char = source[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            stack.append(index)
        elif char == "]" and stack:
            pairs[stack.pop()] = index
        index += 1
    return pairs


def _resolve_emphasis(nodes: list[_Node]) -> list[Inline]:
    """Pair delimiter runs (CommonMark's algorithm, without its performance tricks)."""
    index = 0
    while index < len(nodes):
        closer = nodes[index]
        if not (isinstance(closer, _Delimiter) and closer.can_close and closer.count > 0):
            index += 1
            continue
        opener_index = _find_opener(nodes, index, closer)
        if opener_index is None:
            index += 1
            continue
        opener = nodes[opener_index]
        assert isinstance(opener, _Delimiter)
        if closer.char == "~":
            used, style = 2, "s"
        else:
            used = 2 if opener.count >= 2 and closer.count >= 2 else 1
            style = "b" if used == 2 else "i"
        depth = 1 + max((_depth(node) for node in nodes[opener_index + 1 : index]), default=0)
        if depth > _MAX_EMPHASIS_DEPTH:
            # too deep to render; any later pair around it would be deeper still
            opener.can_open = closer.can_close = False
            index += 1
            continue
        inner = _literal(nodes[opener_index + 1 : index])
        opener.count -= used
        closer.count -= used
        nodes = [*nodes[: opener_index + 1], Emphasis(style, inner, depth), *nodes[index:]]
        index = opener_index + 2
        if opener.count == 0:
            del nodes[opener_index]
            index -= 1
        if closer.count == 0:
            del nodes[index]
    return _literal(nodes)


def _find_opener(nodes: list[_Node], closer_index: int, closer: _Delimiter) -> int | None:
    for index in range(closer_index - 1, -1, -1):
        opener = nodes[index]
        if not (
            isinstance(opener, _Delimiter)
            and opener.char == closer.char
            and opener.can_open
            and opener.count > 0
        ):
            continue
        both = opener.can_close or closer.can_open
        if both and (opener.run + closer.run) % 3 == 0 and (opener.run % 3 or closer.run % 3):
            continue  # CommonMark's "rule of 3"
        return index
    return None


def _depth(node: _Node) -> int:
    if isinstance(node, Emphasis):
        return node.depth
    if isinstance(node, Link):
        return 1 + max((_depth(child) for child in node.children), default=0)
    return 0


def _literal(nodes: list[_Node]) -> list[Inline]:
    out: list[Inline] = []
    for node in nodes:
        if isinstance(node, _Delimiter):
            if node.count == 0:
                continue
            node = Text(node.char * node.count)
        if isinstance(node, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + node.text)
        elif not (isinstance(node, Text) and not node.text):
            out.append(node)
    return out


def plain_text(nodes: list[Inline]) -> str:
    """The text of `nodes` without any markup."""
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, Text | Code | SlackToken):
            parts.append(node.text)
        else:
            parts.append(plain_text(node.children))
    return "".join(parts)


def link_label(link: Link) -> str:
    """What to show for a link whose text cannot carry it: "text (url)" or just the url."""
    text = plain_text(link.children)
    if not text.strip() or text == link.url:
        return link.url
    return f"{text} ({link.url})"
