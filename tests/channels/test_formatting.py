"""Markdown rendering for Telegram HTML, Slack mrkdwn, Signal styles and plain text."""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels.chunking import split_markdown
from channels.formatting import render_plain, utf16_len
from channels.signal.render import render_signal_text
from channels.slack.render import render_slack_mrkdwn
from channels.telegram.render import render_telegram_html

# -- checkers --


class TelegramHTMLChecker(HTMLParser):
    """Telegram's HTML rules: known tags only, properly nested, nothing unescaped, and the
    nesting Telegram allows (nothing inside code; pre only around code; no nested
    blockquotes or links; no code in links; no pre in a blockquote)."""

    ALLOWED = frozenset({"b", "i", "s", "code", "pre", "a", "blockquote"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.ALLOWED:
            self.errors.append(f"unknown tag <{tag}>")
        if "code" in self.stack:
            self.errors.append(f"<{tag}> inside <code>")
        if "pre" in self.stack and not (tag == "code" and self.stack[-1] == "pre"):
            self.errors.append(f"<{tag}> inside <pre>")
        if tag in ("blockquote", "a") and tag in self.stack:
            self.errors.append(f"nested <{tag}>")
        if tag == "pre" and "blockquote" in self.stack:
            self.errors.append("<pre> inside <blockquote>")
        if tag == "code" and "a" in self.stack:
            self.errors.append("<code> inside <a>")
        if tag == "a" and [name for name, _ in attrs] != ["href"]:
            self.errors.append(f"<a> attributes {attrs}")
        if (
            tag == "code"
            and attrs
            and not (
                self.stack[-1:] == ["pre"] and re.fullmatch(r"language-\S+", attrs[0][1] or "")
            )
        ):
            self.errors.append(f"<code> attributes {attrs}")
        if tag not in ("a", "code") and attrs:
            self.errors.append(f"<{tag}> attributes {attrs}")
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_data(self, data: str) -> None:
        for char in "<>&":
            if char in data:
                self.errors.append(f"unescaped {char!r} in {data!r}")

    def handle_entityref(self, name: str) -> None:
        if name not in ("amp", "lt", "gt", "quot"):
            self.errors.append(f"entity &{name};")

    def handle_charref(self, name: str) -> None:
        self.errors.append(f"char ref &#{name};")

    def handle_comment(self, data: str) -> None:
        self.errors.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.errors.append("declaration")

    def unknown_decl(self, data: str) -> None:
        self.errors.append("declaration")

    def handle_pi(self, data: str) -> None:
        self.errors.append("processing instruction")


def assert_telegram_html(markup: str) -> None:
    checker = TelegramHTMLChecker()
    checker.feed(markup)
    checker.close()
    assert not checker.errors, (checker.errors, markup)
    assert not checker.stack, (f"unclosed {checker.stack}", markup)
    # HTMLParser forgives a bare "<" before a non-letter: check the raw text as well
    leftover = re.sub(r"</?[a-z]+(?: [a-z]+=\"[^\"<>]*\")?>|&(?:amp|lt|gt|quot);", "", markup)
    assert not re.search(r"[<>&]", leftover), markup


def telegram_visible(markup: str) -> str:
    """The text Telegram counts: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", markup))


def signal_spans(text: str, styles: list[str]) -> list[tuple[str, str]]:
    """(styled substring, STYLE) for each range, reading start/length as UTF-16 units."""
    encoded = text.encode("utf-16-le")
    spans = []
    for spec in styles:
        start, length, style = spec.split(":")
        piece = encoded[2 * int(start) : 2 * (int(start) + int(length))]
        spans.append((piece.decode("utf-16-le"), style))
    return spans


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def no_formatter_fallback() -> Iterator[None]:
    """Fail when a renderer had to fall back to unformatted text (an internal error)."""
    records = _Records()
    logger = logging.getLogger("channels.formatting")
    logger.addHandler(records)
    try:
        yield
    finally:
        logger.removeHandler(records)
    assert not records.records, [record.getMessage() for record in records.records]


# -- Telegram --


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("Use **bold** and *italic*.", "Use <b>bold</b> and <i>italic</i>."),
        ("__bold__ and _italic_ and ~~gone~~", "<b>bold</b> and <i>italic</i> and <s>gone</s>"),
        ("***both***", "<i><b>both</b></i>"),
        (
            "Call `snake_case_name()` or snake_case_name",
            "Call <code>snake_case_name()</code> or snake_case_name",
        ),
        ("2*3*4 = 24 and x**2 + y**2", "2*3*4 = 24 and x**2 + y**2"),
        ("a * b * c", "a * b * c"),
        ("**not closed and _not either", "**not closed and _not either"),
        ("AT&T <script>alert(1)</script>", "AT&amp;T &lt;script&gt;alert(1)&lt;/script&gt;"),
        ("``code with ` inside``", "<code>code with ` inside</code>"),
        ("`<b>&`", "<code>&lt;b&gt;&amp;</code>"),
        ("\\*not italic\\*", "*not italic*"),
        ("~5 minutes, ~~~ not strike", "~5 minutes, ~~~ not strike"),
        (
            "See https://example.com/some_path_name_here and go.",
            "See https://example.com/some_path_name_here and go.",
        ),
        (
            '[docs](https://ex.com/a_b?x=1&y="2")',
            '<a href="https://ex.com/a_b?x=1&amp;y=&quot;2&quot;">docs</a>',
        ),
        ("[run](javascript:alert(1))", "run (javascript:alert(1))"),
        (
            "<https://auto.link/x_y_z>",
            '<a href="https://auto.link/x_y_z">https://auto.link/x_y_z</a>',
        ),
        ("![diagram](https://ex.com/d.png)", '<a href="https://ex.com/d.png">diagram</a>'),
        ("[`code` link](https://ex.com)", '<a href="https://ex.com">code link</a>'),
        ("**bold with `code`**", "<b>bold with <code>code</code></b>"),
        ("# Title with **bold**", "<b>Title with bold</b>"),
        ("### C# tips ###", "<b>C# tips</b>"),
        ("#hashtag", "#hashtag"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("1. first\n2) second", "1. first\n2) second"),
        ("- [ ] todo\n- [x] done", "☐ todo\n☑ done"),
        ("---", "———"),
        ("> quoted **text**\n> more", "<blockquote>quoted <b>text</b>\nmore</blockquote>"),
        ("> outer\n>> inner", "<blockquote>outer\ninner</blockquote>"),
        ("> ```\n> x < 1\n> ```", "<blockquote><code>x &lt; 1</code></blockquote>"),
        ("para one\n\n\n\npara two", "para one\n\npara two"),
    ],
)
def test_telegram_html_renders_claude_markdown(md: str, expected: str) -> None:
    with no_formatter_fallback():
        markup = render_telegram_html(md)
    assert markup == expected
    assert_telegram_html(markup)


def test_telegram_code_block_keeps_language_and_escapes_html_inside() -> None:
    md = 'Here:\n\n```html\n<div class="x">&amp; **not bold**</div>\n```\n\nDone.'
    assert render_telegram_html(md) == (
        "Here:\n\n"
        '<pre><code class="language-html">&lt;div class="x"&gt;&amp;amp; **not bold**'
        "&lt;/div&gt;</code></pre>\n\nDone."
    )


def test_telegram_code_block_without_language_or_with_odd_language_is_plain_pre() -> None:
    assert render_telegram_html("```\nls -la\n```") == "<pre>ls -la</pre>"
    assert render_telegram_html('```"><script>\nx\n```') == "<pre>x</pre>"


def test_telegram_unclosed_fence_runs_to_the_end_as_code() -> None:
    assert render_telegram_html("```python\nprint(1)\n") == (
        '<pre><code class="language-python">print(1)\n</code></pre>'
    )


def test_telegram_table_is_kept_verbatim_as_preformatted_text() -> None:
    md = "| name | value |\n|------|-------|\n| a_b  | 1 < 2 |"
    assert render_telegram_html(md) == (
        "<pre>| name | value |\n|------|-------|\n| a_b  | 1 &lt; 2 |</pre>"
    )


def test_telegram_code_block_indented_in_a_list_item_loses_the_list_indent() -> None:
    md = "1. Install:\n   ```bash\n   pip install perch\n   ```\n2. Run it"
    assert render_telegram_html(md) == (
        '1. Install:\n<pre><code class="language-bash">pip install perch</code></pre>\n2. Run it'
    )


# -- Slack --


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("Use **bold**, *italic* and ~~strike~~.", "Use *bold*, _italic_ and ~strike~."),
        ("## Heading with **bold**", "*Heading with bold*"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("AT&T says 1 < 2 > 0", "AT&amp;T says 1 &lt; 2 &gt; 0"),
        ("[the docs](https://ex.com/a_b?x=1&y=2)", "<https://ex.com/a_b?x=1&amp;y=2|the docs>"),
        ("[a|b](https://ex.com/p|q)", "<https://ex.com/p%7Cq|a|b>"),
        ("<https://ex.com>", "<https://ex.com>"),
        ("[x](ftp://old.host/file)", "x (ftp://old.host/file)"),
        ("ping <@U012AB3CD> in <#C123ABC|general>", "ping <@U012AB3CD> in <#C123ABC|general>"),
        ("`a < b`", "`a &lt; b`"),
        ("- item\n> quote", "• item\n> quote"),
        ("***both***", "_*both*_"),
    ],
)
def test_slack_mrkdwn_renders_claude_markdown(md: str, expected: str) -> None:
    with no_formatter_fallback():
        assert render_slack_mrkdwn(md) == expected


def test_slack_code_block_drops_language_and_escapes_but_stays_one_block() -> None:
    md = "```python\nif a < b and c & d:\n    print('```')\n```"
    out = render_slack_mrkdwn(md)
    assert out == "```\nif a &lt; b and c &amp; d:\n    print('``\u200b`')\n```"
    assert out.count("```") == 2


# -- Signal --


def test_signal_offsets_count_emoji_as_two_utf16_units() -> None:
    text, styles = render_signal_text("👋 **Hi** there")
    assert text == "👋 Hi there"
    assert styles == ["3:2:BOLD"]
    assert signal_spans(text, styles) == [("Hi", "BOLD")]


def test_signal_offsets_match_signal_cli_rest_api_reference_vector() -> None:
    # the same case signal-cli-rest-api's own parser is tested with
    assert render_signal_text("Test 👦🏿 via **signal** API") == (
        "Test 👦🏿 via signal API",
        ["14:6:BOLD"],
    )


@pytest.mark.parametrize(
    ("md", "text", "spans"),
    [
        ("*it* and ~~no~~", "it and no", [("it", "ITALIC"), ("no", "STRIKETHROUGH")]),
        ("***both***", "both", [("both", "BOLD"), ("both", "ITALIC")]),
        ("use `x_y` now", "use x_y now", [("x_y", "MONOSPACE")]),
        ("# 🎉 Done", "🎉 Done", [("🎉 Done", "BOLD")]),
        ("```js\nlet a = 1;\n```", "let a = 1;", [("let a = 1;", "MONOSPACE")]),
        (
            "[site](https://ex.com) and **[b](https://b.io)**",
            "site (https://ex.com) and b (https://b.io)",
            [("b (https://b.io)", "BOLD")],
        ),
        ("> **quoted**\n> line", "> quoted\n> line", [("quoted", "BOLD")]),
        (">no space\n>here", ">no space\n>here", []),
        ("2*3*4 and snake_case", "2*3*4 and snake_case", []),
    ],
)
def test_signal_text_and_styles(md: str, text: str, spans: list[tuple[str, str]]) -> None:
    with no_formatter_fallback():
        rendered, styles = render_signal_text(md)
    assert rendered == text
    assert signal_spans(rendered, styles) == spans


# -- plain --


@pytest.mark.parametrize(
    ("md", "expected"),
    [
        ("**Bold** _it_ `code` ~~s~~", "Bold it code s"),
        ("[docs](https://ex.com/x_y)", "docs (https://ex.com/x_y)"),
        ("[https://ex.com](https://ex.com)", "https://ex.com"),
        ("# Title\n\n- a\n- b", "Title\n\n• a\n• b"),
        ("```\n<raw> & stuff\n```", "<raw> & stuff"),
        ("snake_case_name 2*3*4", "snake_case_name 2*3*4"),
    ],
)
def test_plain_text_removes_markers_and_spells_out_links(md: str, expected: str) -> None:
    with no_formatter_fallback():
        assert render_plain(md) == expected


def test_deeply_nested_emphasis_renders_without_falling_back() -> None:
    md = "_a " * 1100 + "deep" + " a_" * 1100  # deeper than Python's recursion limit
    with no_formatter_fallback():
        markup = render_telegram_html(md)
        text, styles = render_signal_text(md)
    assert_telegram_html(markup)
    assert markup.startswith("_a ") and "<i>a " in markup and "deep" in markup
    assert "deep" in text and styles


def test_utf16_len_counts_astral_characters_twice() -> None:
    assert utf16_len("a👋é") == 4


# -- properties --

markdownish = st.lists(
    st.sampled_from(
        [
            *"*_~`[]()<>&#>-|!\\\n :/.h1xé👋\u200d\"'",
            *["https://", "```", "**", "~~", "> ", "- ", "1. ", "|---|", "](", "\n\n"],
            *["```py\n", "[a](https://b.c/d_e)"],
        ]
    ),
    max_size=120,
).map("".join)
any_text = st.one_of(st.text(max_size=300), markdownish)


@given(md=any_text)
@settings(max_examples=300)
def test_renderers_never_fail_and_never_grow_what_users_see(md: str) -> None:
    with no_formatter_fallback():
        markup = render_telegram_html(md)
        slack = render_slack_mrkdwn(md)
        signal_text, styles = render_signal_text(md)
        plain = render_plain(md)
    assert len(telegram_visible(markup)) <= len(md)
    assert len(slack) <= 5 * len(md)
    assert len(signal_text) <= len(md)
    assert plain == signal_text
    for spec in styles:
        start, length, style = spec.split(":")
        assert style in {"BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE"}
        assert int(length) > 0
        assert int(start) + int(length) <= utf16_len(signal_text)
    # ranges fall on code point boundaries: decoding strictly would fail on half a pair
    assert all(piece for piece, _ in signal_spans(signal_text, styles))


@given(md=any_text)
@settings(max_examples=300)
def test_telegram_html_is_well_formed_for_any_input(md: str) -> None:
    assert_telegram_html(render_telegram_html(md))


@given(md=markdownish, limit=st.integers(min_value=50, max_value=300))
def test_chunks_render_to_well_formed_telegram_html_within_the_limit(md: str, limit: int) -> None:
    for chunk in split_markdown(md, limit):
        markup = render_telegram_html(chunk)
        assert_telegram_html(markup)
        assert len(telegram_visible(markup)) <= limit
