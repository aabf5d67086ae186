"""Rendering Claude's Markdown for each platform: Telegram HTML, Slack mrkdwn, Signal styles.

Owns one small Markdown reader (blocks, then inline spans with CommonMark's flanking rules)
and four renderers over it. Pure functions; they never raise (a bug falls back to escaped
plain text and logs the exception type, never the text).

What is understood: paragraphs, `**bold**`/`__bold__`, `*italic*`/`_italic_`, `~~strike~~`,
`` `code` `` (any number of backticks), fenced code blocks with a language, `[text](url)`,
`<https://autolinks>`, images (as links), headings `#`..`######` (bold lines), bullet,
numbered and task lists (kept as text with "•", the number, "☐"/"☑"), `>` blockquotes,
tables (kept verbatim, monospace), rules (`———`), backslash escapes. Emphasis follows the
flanking rules, plus one rule of ours: a `*` run inside a word (`2*3*4`, `x**2`) is literal
like `_` is (`snake_case_name`). Unmatched markers stay literal text.

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
import re
import string
import unicodedata
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from channels.chunking import parse_fence

__all__ = [
    "render_plain",
    "render_signal_text",
    "render_slack_mrkdwn",
    "render_telegram_html",
    "utf16_len",
]

log = logging.getLogger(__name__)

_MAX_EMPHASIS_DEPTH = 16
_MAX_QUOTE_DEPTH = 8
_MAX_LINK_TEXT = 1000
_RULE_TEXT = "———"
_SAFE_LINK = re.compile(r"(?:https?://|mailto:|tg://)[^\s]+", re.IGNORECASE)
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_ESCAPABLE = frozenset(string.punctuation)

_HEADING = re.compile(r"[ \t]{0,3}(#{1,6})(?:[ \t]+(.*))?")
_HEADING_CLOSE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_RULE = re.compile(r"[ \t]{0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_BULLET = re.compile(r"([ \t]*)[-*+][ \t]+(\S.*)")
_ORDERED = re.compile(r"([ \t]*)(\d{1,9}[.)])[ \t]+(\S.*)")
_TASK = re.compile(r"\[([ xX])\][ \t]+(\S.*)")
_QUOTE = re.compile(r"[ \t]{0,3}>")
_TABLE_SEPARATOR = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")

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


# -- public API --


def render_telegram_html(md: str) -> str:
    """Markdown as Telegram Bot API HTML (`parse_mode="HTML"`): well-formed for any input.

    Uses `<b> <i> <s> <code> <pre> <a href> <blockquote>`; `&`, `<`, `>` are escaped
    everywhere else. Code blocks keep their language (`<pre><code class="language-x">`),
    except inside a blockquote where they become `<code>` (Telegram nests little). Links with
    schemes other than http(s), mailto and tg are shown as "text (url)".
    """
    return _safely(_render_telegram, md, lambda: _escape_html(md))


def render_slack_mrkdwn(md: str) -> str:
    """Markdown as Slack mrkdwn: `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ``` blocks
    (no language), `<url|text>` links, headings as bold lines.

    `&`, `<`, `>` become `&amp;`, `&lt;`, `&gt;` everywhere except in the link brackets
    themselves (inside a link's URL and text they are escaped too, `|` in a URL becomes
    `%7C`). Slack mention tokens the model copied (`<@U123>`, `<#C123>`, `<!here>`) are kept.
    """
    return _safely(_render_slack, md, lambda: _escape_slack(md))


def render_signal_text(md: str) -> tuple[str, list[str]]:
    """Markdown as plain text plus signal-cli text styles `"start:length:STYLE"`.

    STYLE is one of BOLD, ITALIC, STRIKETHROUGH, MONOSPACE (SPOILER is never produced);
    `start` and `length` count UTF-16 code units, as signal-cli does. Styles may nest and are
    sorted by start, longest first.
    """
    return _safely(_render_signal, md, lambda: (md, []))


def render_plain(md: str) -> str:
    """Markdown as plain text: markers removed, links as "text (url)"; the fallback to send
    when a platform rejects formatted text."""
    return _safely(_render_plain, md, lambda: md)


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units (what Telegram and Signal count)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


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


# -- blocks --


@dataclass(slots=True)
class _Paragraph:
    text: str


@dataclass(slots=True)
class _Heading:
    text: str


@dataclass(slots=True)
class _CodeBlock:
    language: str
    body: str


@dataclass(slots=True)
class _Quote:
    blocks: list[_Block]
    separator: str  # " " when every quoted line had a space after ">", else ""


@dataclass(slots=True)
class _Item:
    prefix: str  # indentation + "• " / "3. " / "☐ "
    text: str


@dataclass(slots=True)
class _Table:
    text: str


@dataclass(slots=True)
class _Rule:
    pass


@dataclass(slots=True)
class _Blank:
    pass


_Block = _Paragraph | _Heading | _CodeBlock | _Quote | _Item | _Table | _Rule | _Blank


def _parse_blocks(md: str, depth: int = 0) -> list[_Block]:
    lines = md.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[_Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            if blocks and not isinstance(blocks[-1], _Blank):
                blocks.append(_Blank())
            index += 1
            continue
        fence = parse_fence(line)
        if fence is not None:
            body: list[str] = []
            index += 1
            while index < len(lines) and not fence.closes(lines[index]):
                body.append(_dedent(lines[index], len(fence.indent)))
                index += 1
            index += 1  # the closing line (or past the end)
            blocks.append(_CodeBlock(fence.language, "\n".join(body)))
            continue
        if depth < _MAX_QUOTE_DEPTH and _QUOTE.match(line):
            quoted: list[str] = []
            spaced = True
            while index < len(lines) and _QUOTE.match(lines[index]):
                rest = lines[index].lstrip(" \t")[1:]
                if rest.startswith(" "):
                    rest = rest[1:]
                elif rest.strip():
                    spaced = False
                quoted.append(rest)
                index += 1
            inner = _parse_blocks("\n".join(quoted), depth + 1)
            blocks.append(_Quote(inner, " " if spaced else ""))
            continue
        if _starts_table(lines, index):
            table: list[str] = []
            while index < len(lines) and "|" in lines[index] and lines[index].strip():
                table.append(lines[index].rstrip())
                index += 1
            blocks.append(_Table("\n".join(table)))
            continue
        single = _single_line_block(line)
        if single is not None:
            blocks.append(single)
            index += 1
            continue
        paragraph = [line.rstrip()]
        index += 1
        while index < len(lines) and not _interrupts(lines, index, depth):
            paragraph.append(lines[index].rstrip())
            index += 1
        blocks.append(_Paragraph("\n".join(paragraph)))
    while blocks and isinstance(blocks[-1], _Blank):
        blocks.pop()
    return blocks


def _single_line_block(line: str) -> _Block | None:
    heading = _HEADING.fullmatch(line)
    if heading is not None:
        return _Heading(_HEADING_CLOSE.sub("", heading.group(2) or "").strip())
    if _RULE.fullmatch(line):
        return _Rule()
    bullet = _BULLET.fullmatch(line)
    if bullet is not None:
        indent, text = bullet.groups()
        task = _TASK.fullmatch(text)
        if task is not None:
            return _Item(f"{indent}{'☐' if task.group(1) == ' ' else '☑'} ", task.group(2))
        return _Item(f"{indent}• ", text)
    ordered = _ORDERED.fullmatch(line)
    if ordered is not None:
        indent, number, text = ordered.groups()
        return _Item(f"{indent}{number} ", text)
    return None


def _interrupts(lines: list[str], index: int, depth: int) -> bool:
    line = lines[index]
    return (
        not line.strip()
        or parse_fence(line) is not None
        or (depth < _MAX_QUOTE_DEPTH and _QUOTE.match(line) is not None)
        or _starts_table(lines, index)
        or _single_line_block(line) is not None
    )


def _starts_table(lines: list[str], index: int) -> bool:
    return (
        index + 1 < len(lines)
        and "|" in lines[index]
        and "|" in lines[index + 1]
        and _TABLE_SEPARATOR.fullmatch(lines[index + 1]) is not None
    )


def _dedent(line: str, width: int) -> str:
    removable = len(line) - len(line.lstrip(" "))
    return line[min(width, removable) :]


# -- inline spans --


@dataclass(slots=True)
class _Text:
    text: str


@dataclass(slots=True)
class _Code:
    text: str


@dataclass(slots=True)
class _Link:
    children: list[_Inline]
    url: str


@dataclass(slots=True)
class _Emphasis:
    style: str  # "b", "i" or "s"
    children: list[_Inline]
    depth: int


@dataclass(slots=True)
class _SlackToken:
    text: str


@dataclass(slots=True)
class _Delimiter:
    char: str
    count: int
    run: int
    can_open: bool
    can_close: bool


_Inline = _Text | _Code | _Link | _Emphasis | _SlackToken
_Node = _Inline | _Delimiter


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

    def parse(self) -> list[_Inline]:
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
            self.nodes.append(_Text("".join(self.buffer)))
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
                self._emit(_SlackToken(token.group()))
                return token.end()
            auto = _AUTOLINK.match(source, index) if self.allow_links else None
            if auto is not None:
                self._emit(_Link([_Text(auto.group(1))], auto.group(1)))
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
                self._emit(_Text(url))  # its own node: no emphasis inside a URL
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
            self._emit(_Code(content))
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
        self._emit(_Link(children, url))
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


def _parse_inline(text: str) -> list[_Inline]:
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


def _resolve_emphasis(nodes: list[_Node]) -> list[_Inline]:
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
        nodes = [*nodes[: opener_index + 1], _Emphasis(style, inner, depth), *nodes[index:]]
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
    if isinstance(node, _Emphasis):
        return node.depth
    if isinstance(node, _Link):
        return 1 + max((_depth(child) for child in node.children), default=0)
    return 0


def _literal(nodes: list[_Node]) -> list[_Inline]:
    out: list[_Inline] = []
    for node in nodes:
        if isinstance(node, _Delimiter):
            if node.count == 0:
                continue
            node = _Text(node.char * node.count)
        if isinstance(node, _Text) and out and isinstance(out[-1], _Text):
            out[-1] = _Text(out[-1].text + node.text)
        elif not (isinstance(node, _Text) and not node.text):
            out.append(node)
    return out


def _plain_text(nodes: list[_Inline]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, _Text | _Code | _SlackToken):
            parts.append(node.text)
        else:
            parts.append(_plain_text(node.children))
    return "".join(parts)


def _link_label(link: _Link) -> str:
    """What to show for a link whose text cannot carry it: "text (url)" or just the url."""
    text = _plain_text(link.children)
    if not text.strip() or text == link.url:
        return link.url
    return f"{text} ({link.url})"


# -- Telegram --


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _render_telegram(md: str) -> str:
    return "\n".join(_telegram_blocks(_parse_blocks(md), in_quote=False))


def _telegram_blocks(blocks: list[_Block], *, in_quote: bool) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, _Blank):
            out.append("")
        elif isinstance(block, _Paragraph):
            out.append(_telegram_inline(_parse_inline(block.text), frozenset()))
        elif isinstance(block, _Heading):
            inner = _telegram_inline(_parse_inline(block.text), frozenset({"b"}))
            out.append(f"<b>{inner}</b>" if inner.strip() else inner)
        elif isinstance(block, _Item):
            out.append(
                _escape_html(block.prefix)
                + _telegram_inline(_parse_inline(block.text), frozenset())
            )
        elif isinstance(block, _CodeBlock | _Table):
            out.append(_telegram_code_block(block, in_quote=in_quote))
        elif isinstance(block, _Rule):
            out.append(_RULE_TEXT)
        elif isinstance(block, _Quote):
            inner = "\n".join(_telegram_blocks(block.blocks, in_quote=True))
            if in_quote or not inner.strip():
                out.append(inner)  # Telegram cannot nest blockquotes
            else:
                out.append(f"<blockquote>{inner}</blockquote>")
    return out


def _telegram_code_block(block: _CodeBlock | _Table, *, in_quote: bool) -> str:
    body = block.body if isinstance(block, _CodeBlock) else block.text
    if not body:
        return ""
    escaped = _escape_html(body)
    if in_quote:
        return f"<code>{escaped}</code>"
    language = block.language if isinstance(block, _CodeBlock) else ""
    if _LANGUAGE.fullmatch(language):
        return f'<pre><code class="language-{language}">{escaped}</code></pre>'
    return f"<pre>{escaped}</pre>"


_TELEGRAM_TAGS = {"b": "b", "i": "i", "s": "s"}


def _telegram_inline(nodes: list[_Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, _Text | _SlackToken):
            parts.append(_escape_html(node.text))
        elif isinstance(node, _Code):
            if "a" in active or not node.text:
                parts.append(_escape_html(node.text))  # links cannot contain code
            else:
                parts.append(f"<code>{_escape_html(node.text)}</code>")
        elif isinstance(node, _Emphasis):
            inner = _telegram_inline(node.children, active | {node.style})
            tag = _TELEGRAM_TAGS[node.style]
            if node.style in active or not inner:
                parts.append(inner)
            else:
                parts.append(f"<{tag}>{inner}</{tag}>")
        elif isinstance(node, _Link):
            inner = _telegram_inline(node.children, active | {"a"})
            if "a" in active or not _SAFE_LINK.fullmatch(node.url):
                parts.append(_escape_html(_link_label(node)) if "a" not in active else inner)
            elif not inner.strip():
                parts.append(_escape_html(node.url))
            else:
                href = _escape_html(node.url).replace('"', "&quot;")
                parts.append(f'<a href="{href}">{inner}</a>')
    return "".join(parts)


# -- Slack --


def _escape_slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_BROKEN_FENCE = "``\u200b`"  # keeps a ``` inside code from ending Slack's code block
_SLACK_MARKERS = {"b": "*", "i": "_", "s": "~"}


def _render_slack(md: str) -> str:
    return "\n".join(_slack_blocks(_parse_blocks(md)))


def _slack_blocks(blocks: list[_Block]) -> list[str]:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, _Blank):
            out.append("")
        elif isinstance(block, _Paragraph):
            out.append(_slack_inline(_parse_inline(block.text), frozenset()))
        elif isinstance(block, _Heading):
            inner = _slack_inline(_parse_inline(block.text), frozenset({"b"}))
            out.append(f"*{inner}*" if inner.strip() else inner)
        elif isinstance(block, _Item):
            out.append(
                _escape_slack(block.prefix) + _slack_inline(_parse_inline(block.text), frozenset())
            )
        elif isinstance(block, _CodeBlock | _Table):
            body = block.body if isinstance(block, _CodeBlock) else block.text
            if body:
                out.append(f"```\n{_escape_slack(body).replace('```', _BROKEN_FENCE)}\n```")
        elif isinstance(block, _Rule):
            out.append(_RULE_TEXT)
        elif isinstance(block, _Quote):
            inner = "\n".join(_slack_blocks(block.blocks))
            out.append("\n".join(f"> {line}" if line else ">" for line in inner.split("\n")))
    return out


def _slack_inline(nodes: list[_Inline], active: frozenset[str]) -> str:
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            parts.append(_escape_slack(node.text))
        elif isinstance(node, _SlackToken):
            parts.append(node.text)
        elif isinstance(node, _Code):
            if node.text.strip("`"):
                parts.append(f"`{_escape_slack(node.text.replace('`', 'ˋ'))}`")
            else:
                parts.append(_escape_slack(node.text))
        elif isinstance(node, _Emphasis):
            inner = _slack_inline(node.children, active | {node.style})
            marker = _SLACK_MARKERS[node.style]
            if node.style in active or not inner.strip():
                parts.append(inner)
            else:
                parts.append(f"{marker}{inner}{marker}")
        elif isinstance(node, _Link):
            parts.append(_slack_link(node))
    return "".join(parts)


def _slack_link(link: _Link) -> str:
    if not _SAFE_LINK.fullmatch(link.url):
        return _escape_slack(_link_label(link))
    url = _escape_slack(link.url).replace("|", "%7C")
    text = _plain_text(link.children).replace("\n", " ")
    if not text.strip() or text == link.url:
        return f"<{url}>"
    return f"<{url}|{_escape_slack(text)}>"


# -- Signal and plain text --


@dataclass(slots=True)
class _StyledText:
    """Text under construction with UTF-16 style ranges; quote prefixes added per line."""

    parts: list[str] = field(default_factory=list)
    units: int = 0
    ranges: list[tuple[int, int, str]] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    at_line_start: bool = True

    def add(self, text: str) -> None:
        for index, line in enumerate(text.split("\n")):
            if index:
                self._raw("\n")
                self.at_line_start = True
            if line:
                self._line_prefix()
                self._raw(line)

    def mark(self) -> int:
        """Where a styled span starts: after the quote prefix of the line it starts on."""
        if not self.at_line_start or not self.prefixes:
            return self.units
        self._line_prefix()
        return self.units

    def _line_prefix(self) -> None:
        if self.at_line_start and self.prefixes:
            self._raw("".join(self.prefixes))
        self.at_line_start = False

    def newline(self) -> None:
        if self.at_line_start and self.prefixes:
            self._raw("".join(prefix.rstrip() for prefix in self.prefixes))
        self._raw("\n")
        self.at_line_start = True

    def _raw(self, text: str) -> None:
        self.parts.append(text)
        self.units += utf16_len(text)

    def style(self, start: int, style: str) -> None:
        if self.units > start:
            self.ranges.append((start, self.units - start, style))

    def text(self) -> str:
        return "".join(self.parts)


_SIGNAL_STYLES = {"b": "BOLD", "i": "ITALIC", "s": "STRIKETHROUGH"}


def _render_signal(md: str) -> tuple[str, list[str]]:
    out = _StyledText()
    _styled_blocks(out, _parse_blocks(md))
    ranges = sorted(out.ranges, key=lambda item: (item[0], -item[1], item[2]))
    return out.text(), [f"{start}:{length}:{style}" for start, length, style in ranges]


def _render_plain(md: str) -> str:
    out = _StyledText()
    _styled_blocks(out, _parse_blocks(md))
    return out.text()


def _styled_blocks(out: _StyledText, blocks: list[_Block]) -> None:
    for number, block in enumerate(blocks):
        if number:
            out.newline()
        if isinstance(block, _Paragraph):
            _styled_inline(out, _parse_inline(block.text), frozenset())
        elif isinstance(block, _Heading):
            start = out.mark()
            _styled_inline(out, _parse_inline(block.text), frozenset({"b"}))
            out.style(start, "BOLD")
        elif isinstance(block, _Item):
            out.add(block.prefix)
            _styled_inline(out, _parse_inline(block.text), frozenset())
        elif isinstance(block, _CodeBlock | _Table):
            start = out.mark()
            out.add(block.body if isinstance(block, _CodeBlock) else block.text)
            out.style(start, "MONOSPACE")
        elif isinstance(block, _Rule):
            out.add(_RULE_TEXT)
        elif isinstance(block, _Quote):
            out.prefixes.append(">" + block.separator)
            _styled_blocks(out, block.blocks)
            out.prefixes.pop()


def _styled_inline(out: _StyledText, nodes: list[_Inline], active: frozenset[str]) -> None:
    for node in nodes:
        if isinstance(node, _Text | _SlackToken):
            out.add(node.text)
        elif isinstance(node, _Code):
            start = out.mark()
            out.add(node.text)
            out.style(start, "MONOSPACE")
        elif isinstance(node, _Emphasis):
            start = out.mark()
            _styled_inline(out, node.children, active | {node.style})
            if node.style not in active:
                out.style(start, _SIGNAL_STYLES[node.style])
        elif isinstance(node, _Link):
            text = _plain_text(node.children)
            if not text.strip() or text == node.url:
                out.add(node.url)
            else:
                _styled_inline(out, node.children, active)
                out.add(f" ({node.url})")
