"""Discord's text both ways, as pure functions: Markdown rendered as Discord Markdown (and cut
into chunks that fit), and message content read for the model."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from channels.chunking import parse_fence
from channels.discord.delivery import discord_length, render_chunks
from channels.discord.render import align_table, escape_discord, render_discord
from channels.discord.text import Names, normalise_discord_text

BOT = "1100000000000000001"
ROLE = "1400000000000000001"


@pytest.mark.parametrize(
    ("markdown", "discord"),
    [
        ("**bold** and __bold__ and *it* and _it_", "**bold** and **bold** and *it* and *it*"),
        ("~~gone~~", "~~gone~~"),
        ("# One\n## Two\n### Three\n#### Four", "# One\n## Two\n### Three\n**Four**"),
        ("- a\n  - b\n1. c\n- [x] done", "- a\n  - b\n1. c\n☑ done"),
        ("> quoted\n> > nested", "> quoted\n> nested"),
        ("---", "———"),
        ("2*3*4 and snake_case_name", "2\\*3\\*4 and snake_case_name"),
        ("\\*not italic\\* and \\_x\\_", "\\*not italic\\* and \\_x\\_"),
        ("\\# not a heading", "\\# not a heading"),
        ("see https://x.org/a_b*c_ now", "see https://x.org/a_b*c_ now"),
        ("[the site](https://x.org/a_(b))", "[the site](https://x.org/a_%28b%29)"),
        ("[x](javascript:alert(1))", "x (javascript:alert(1))"),
        ("<https://x.org>", "https://x.org"),
        ("`a` and ``b`c``", "`a` and `` b`c ``"),
        ("```py\nprint('```')\n```", "```py\nprint('``\u200b`')\n```"),
        ("||spoiler|| and -# small", "||spoiler|| and -# small"),
        ("-# a line of small print", "-# a line of small print"),
        ("<@123> at <t:1700000000:R>", "<@123> at <t:1700000000:R>"),
        ("** spaced **", "\\*\\* spaced \\*\\*"),
        ("a *b *c* d* e", "a *b c d* e"),
    ],
)
def test_markdown_reads_as_discord_markdown(markdown: str, discord: str) -> None:
    assert render_discord(markdown) == discord


def test_a_table_becomes_an_aligned_code_block() -> None:
    table = "| name | qty |\n|---|--:|\n| apple | 3 |\n| kiwi \\| fig | 12 |"
    assert render_discord(table) == (
        "```\nname       | qty\n-----------+----\napple      | 3\nkiwi | fig | 12\n```"
    )
    assert align_table("|a|\n|-|\n|b|c|") == "a |\n--+--\nb | c"  # short rows padded


_plain = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\\*_~`[]<>#|-+>!\r"),
    max_size=200,
)


@given(_plain)
def test_text_without_markup_is_sent_as_written(text: str) -> None:
    assume(not re.search(r"https?://", text))
    lines = [line for line in text.split("\n")]
    assume(all(line == line.strip() and line for line in lines) or not text.strip())
    assume(not re.search(r"^\d+[.)] ", text, re.MULTILINE))
    assert render_discord(text) == "\n".join(lines).strip("\n") or not text.strip()


@given(st.text(max_size=300))
def test_escaped_text_never_opens_markup(text: str) -> None:
    escaped = escape_discord(text)
    unescaped = re.sub(r"\\(.)", r"\1", escaped, flags=re.DOTALL)
    assert unescaped == text
    # every *, ` and \ outside a URL is escaped
    outside = re.sub(r"https?://[^\s<>]+", "", escaped, flags=re.IGNORECASE)
    assert not re.search(r"(?<!\\)(?:\\\\)*[*`]", outside)


@given(st.text(max_size=3000), st.integers(min_value=100, max_value=2000))
def test_rendered_chunks_fit_and_keep_fences_balanced(text: str, limit: int) -> None:
    for chunk in render_chunks(text, limit):
        assert discord_length(chunk) <= limit
        fence = None
        for line in chunk.split("\n"):
            if fence is None:
                fence = parse_fence(line)
            elif fence.closes(line):
                fence = None
        assert fence is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (f"<@{BOT}> hi", ("hi", True)),
        (f"hey <@!{BOT}>, there", ("hey there", True)),
        (f"<@&{ROLE}> role call", ("role call", True)),
        ("ask <@2> or <@!3>", ("ask @Bob or @3", False)),
        ("in <#9> with <@&8>", ("in #general with @mods", False)),
        ("nice <:party_parrot:123> <a:spin:456>", ("nice :party_parrot: :spin:", False)),
        ("at <t:1700000000:R> ok", ("at 2023-11-14 22:13 UTC ok", False)),
        ("/new@perch please", ("/new please", False)),
        ("/new@someoneelse", ("/new@someoneelse", False)),
        ("@everyone look", ("@everyone look", False)),
    ],
)
def test_discord_content_is_read_for_the_model(raw: str, expected: tuple[str, bool]) -> None:
    names = Names(users={"2": "Bob"}, roles={"8": "mods"}, channels={"9": "general"})
    assert (
        normalise_discord_text(raw, BOT, bot_roles={ROLE}, bot_name="perch", names=names)
        == expected
    )


@given(st.text(), st.text(), st.sampled_from(["@", "@!"]))
def test_the_bot_mention_is_always_found_and_removed(before: str, after: str, kind: str) -> None:
    assume("<" not in before + after and not before.lstrip().startswith("/"))
    raw = f"{before}<{kind}{BOT}>{after}"
    expected = (before + re.sub(r"\A[:,]?[ \t]*", "", after)).strip()
    assert normalise_discord_text(raw, BOT) == (expected, True)


@given(st.text())
def test_text_without_tokens_comes_back_stripped(text: str) -> None:
    assume("<" not in text)
    assume(not re.match(r"/[A-Za-z0-9_]+@perch(\s|$)", text.strip(), re.IGNORECASE))
    assert normalise_discord_text(text, BOT, bot_name="perch") == (text.strip(), False)
