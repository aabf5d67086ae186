"""The Matrix channel's pure parts: mentions and reply fallbacks read, invitations decided,
Markdown rendered to Matrix HTML, and the options refused with the key at fault."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from channels.matrix.invites import accepts_invite
from channels.matrix.options import MatrixOptions
from channels.matrix.render import render_matrix
from channels.matrix.text import (
    fallback_sender,
    mentions_bot,
    strip_mention,
    strip_reply_fallback,
)

BOT = "@perch:example.org"
ALICE = "@alice:example.org"


@pytest.mark.parametrize(
    ("content", "mentioned"),
    [
        ({"body": "hi", "m.mentions": {"user_ids": [BOT]}}, True),
        ({"body": "hi", "m.mentions": {"user_ids": [ALICE]}}, False),
        (
            {"body": "Perch", "formatted_body": f'<a href="https://matrix.to/#/{BOT}">Perch</a>'},
            True,
        ),
        ({"body": "Perch: what time is it?"}, True),
        ({"body": "ask @perch:example.org about it"}, True),
        ({"body": "perching birds"}, False),
        ({"body": "superperch"}, False),
        ({"body": "hello"}, False),
        ({"body": 3}, False),
        ({"m.mentions": "nonsense"}, False),
    ],
)
def test_a_message_addresses_the_bot_by_mentions_pill_or_name(
    content: dict[str, Any], mentioned: bool
) -> None:
    assert mentions_bot(content, BOT, "Perch") is mentioned


@pytest.mark.parametrize(
    ("text", "stripped"),
    [
        ("Perch: what time is it?", "what time is it?"),
        ("perch, hi", "hi"),
        ("@perch:example.org hello", "hello"),
        ("hello Perch", "hello Perch"),
        ("Perchance", "Perchance"),
    ],
)
def test_the_bots_name_is_taken_out_where_it_opens_the_message(text: str, stripped: str) -> None:
    assert strip_mention(text, BOT, "Perch") == stripped


def test_a_reply_fallback_is_dropped_and_names_who_was_quoted() -> None:
    body = f"> <{BOT}> the earlier answer\n> second line\n\nthanks!"
    assert strip_reply_fallback(body) == "thanks!"
    assert fallback_sender(body) == BOT
    assert strip_reply_fallback("> a quote I wrote\n\nmine") == "> a quote I wrote\n\nmine"
    assert fallback_sender("no fallback") is None


@given(st.text(max_size=200))
def test_reading_any_body_never_raises_and_stripping_only_shortens(body: str) -> None:
    mentions_bot({"body": body}, BOT, "Perch")
    assert len(strip_mention(body, BOT, "Perch")) <= len(body)
    assert len(strip_reply_fallback(body)) <= len(body)


def _options(**values: Any) -> MatrixOptions:
    base: dict[str, Any] = {
        "enabled": True,
        "homeserver": "https://matrix.example.org",
        "user_id": BOT,
        "access_token": "syt_abc_def",
    }
    return MatrixOptions(**{**base, **values})


@pytest.mark.parametrize(
    ("values", "inviter", "room", "direct", "accepted"),
    [
        ({}, "@stranger:x.org", "!r", True, True),  # pairing: join, so the code can be sent
        ({"dm_policy": "allowlist", "allow_from": [ALICE]}, ALICE, "!r", True, True),
        ({"dm_policy": "allowlist", "allow_from": [ALICE]}, "@eve:x.org", "!r", True, False),
        ({"dm_policy": "disabled"}, ALICE, "!r", True, False),
        ({}, "@eve:x.org", "!r", False, False),  # allowlist, room not listed
        ({"groups": ["!r"]}, "@eve:x.org", "!r", False, True),
        ({"allow_from": [ALICE]}, ALICE, "!new", False, True),  # the owner brings the bot
        ({"group_policy": "open"}, "@eve:x.org", "!r", False, True),
        ({"group_policy": "disabled", "allow_from": [ALICE]}, ALICE, "!r", False, False),
    ],
)
def test_invitations_follow_the_access_policy(
    values: dict[str, Any], inviter: str, room: str, direct: bool, accepted: bool
) -> None:
    assert accepts_invite(_options(**values), inviter, room, direct) is accepted


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"homeserver": "matrix.example.org"}, "channels.matrix.homeserver"),
        ({"user_id": "perch"}, "channels.matrix.user_id"),
        ({"access_token": ""}, "channels.matrix.access_token"),
        ({"password": "both"}, "channels.matrix.access_token or channels.matrix.password"),
        ({"allow_from": ["alice"]}, "channels.matrix.allow_from"),
        ({"groups": ["#room:x.org"]}, "channels.matrix.groups"),
    ],
)
def test_bad_options_are_refused_naming_the_key(values: dict[str, Any], key: str) -> None:
    with pytest.raises(ValidationError, match=key):
        _options(**values)


def test_room_ids_with_and_without_a_server_part_are_accepted() -> None:
    assert _options(groups=["!abc:example.org", "!AbC-12_x", "*"]).groups[1] == "!AbC-12_x"


@pytest.mark.parametrize(
    ("md", "html"),
    [
        ("**bold** and *it* ~~gone~~", "<strong>bold</strong> and <em>it</em> <del>gone</del>"),
        ("a <b> & c", "a &lt;b&gt; &amp; c"),
        ("# Title\n\ntext", "<h1>Title</h1>text"),
        ("one\ntwo", "one<br>two"),
        ("```py\nx = 1 < 2\n```", '<pre><code class="language-py">x = 1 &lt; 2</code></pre>'),
        ("> quoted", "<blockquote>quoted</blockquote>"),
        ("[site](https://example.org)", '<a href="https://example.org">site</a>'),
        ("[evil](javascript:alert(1))", "evil (javascript:alert(1))"),
        ("- a\n- b", "• a<br>• b"),
        ("---", "<hr>"),
    ],
)
def test_markdown_renders_as_matrix_html(md: str, html: str) -> None:
    rendered = render_matrix(md)
    assert rendered.html == html
    assert rendered.body == md
    assert rendered.content()["format"] == "org.matrix.custom.html"


class _Balance(HTMLParser):
    VOID = frozenset({"br", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.ok = True
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.open.append(tag)
        if tag == "a" and not any(
            k == "href" and (v or "").startswith(("http", "mailto")) for k, v in attrs
        ):
            self.ok = False

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.ok = False


@given(st.text(alphabet=st.sampled_from("ab <>&*_~`#>-[]()\n:/hjs"), max_size=120))
def test_any_markdown_renders_to_balanced_html_with_only_safe_links(md: str) -> None:
    checker = _Balance()
    checker.feed(render_matrix(md).html)
    checker.close()
    assert checker.ok and not checker.open
