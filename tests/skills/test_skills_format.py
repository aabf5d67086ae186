"""SKILL.md as the Agent Skills format: the rules, the three requirement dialects, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.skills.frontmatter import (
    MAX_DESCRIPTION,
    Requirements,
    SkillFormatError,
    parse_skill,
)


def md(front: str, body: str = "Do the thing.") -> str:
    return f"---\n{front}\n---\n\n{body}\n"


def test_the_minimal_skill_of_the_spec_parses() -> None:
    doc = parse_skill(md("name: notes\ndescription: Keep notes. Use when asked to."), "notes")
    assert (doc.name, doc.description, doc.body) == (
        "notes",
        "Keep notes. Use when asked to.",
        "Do the thing.",
    )
    assert doc.requires == Requirements() and doc.always is False


def test_optional_fields_are_kept() -> None:
    front = (
        "name: pdf\ndescription: PDFs.\nlicense: Apache-2.0\ncompatibility: Requires python3\n"
        "metadata:\n  author: org\n  version: '1.0'\nallowed-tools: Bash(git:*) Read"
    )
    doc = parse_skill(md(front), "pdf")
    assert doc.license == "Apache-2.0" and doc.compatibility == "Requires python3"
    assert doc.metadata == {"author": "org", "version": "1.0"}
    assert doc.allowed_tools == ("Bash(git:*)", "Read")


@pytest.mark.parametrize(
    ("front", "folder", "reason"),
    [
        ("description: x", "a", "no name in the front matter (add name: a)"),
        (
            "name: Bad_Name\ndescription: x",
            "Bad_Name",
            "lowercase letters, digits and single hyphens",
        ),
        ("name: -lead\ndescription: x", "-lead", "single hyphens"),
        ("name: two--dashes\ndescription: x", "two--dashes", "single hyphens"),
        ("name: " + "a" * 65 + "\ndescription: x", "a" * 65, "name is 65 characters; at most 64"),
        ("name: other\ndescription: x", "folder", "does not match its folder 'folder'"),
        ("name: 42\ndescription: x", "42", "name must be text"),
        ("name: a", "a", "no description"),
        ("name: a\ndescription: '   '", "a", "no description"),
        ("name: a\ndescription: " + "d" * (MAX_DESCRIPTION + 1), "a", "at most 1,024"),
        ("name: a\ndescription: [1, 2]", "a", "description must be text"),
        ("name: a\ndescription: x\ncompatibility: " + "c" * 501, "a", "compatibility is 501"),
        ("name: a\ndescription: x\nmetadata: [1]", "a", "metadata must be keys and values"),
        ("name: a\ndescription: x: y: z", "a", "not valid YAML on line 3"),
        ("- just\n- a list", "a", "must be keys and values"),
        ("", "a", "the front matter is empty"),
    ],
)
def test_broken_front_matter_says_what_to_fix(front: str, folder: str, reason: str) -> None:
    with pytest.raises(SkillFormatError, match=None) as caught:
        parse_skill(md(front), folder)
    assert reason in str(caught.value)


def test_a_file_without_front_matter_or_with_an_open_one_is_refused() -> None:
    with pytest.raises(SkillFormatError, match="no front matter"):
        parse_skill("# Just markdown\n", "a")
    with pytest.raises(SkillFormatError, match="never closed"):
        parse_skill("---\nname: a\ndescription: x\n\nbody", "a")


def test_alias_bombs_and_deep_nesting_are_refused_not_expanded() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    )
    with pytest.raises(SkillFormatError, match="over 5,000 values"):
        parse_skill(md("name: a\ndescription: x\n" + bomb), "a")
    with pytest.raises(SkillFormatError):
        parse_skill(md("name: a\ndescription: x\nm: " + "[" * 5000 + "]" * 5000), "a")


def test_crlf_and_a_byte_order_mark_are_read() -> None:
    text = "\ufeff---\r\nname: a\r\ndescription: x\r\n---\r\nbody\r\n"
    assert parse_skill(text, "a").body == "body"


def test_openclaw_requirements_with_trailing_commas_and_legacy_names() -> None:
    front = """name: gh
description: x
metadata:
  {
    "openclaw":
      {
        "requires": { "bins": ["gh"], "anyBins": ["python3", "python"], "env": ["GH_TOKEN"] },
        "os": ["linux", "darwin"],
      },
  }"""
    doc = parse_skill(md(front), "gh")
    assert doc.requires == Requirements(
        ("gh",), ("python3", "python"), ("GH_TOKEN",), ("linux", "darwin")
    )
    legacy = parse_skill(
        md('name: gh\ndescription: x\nmetadata: {"clawdbot": {"always": true}}'), "gh"
    )
    assert legacy.always


def test_nanobot_requirements_as_flow_json_and_as_a_json_string() -> None:
    flow = 'metadata: {"nanobot":{"requires":{"bins":["tmux"],"env":["X"]},"always":true}}'
    doc = parse_skill(md("name: t\ndescription: x\n" + flow), "t")
    assert doc.requires.bins == ("tmux",) and doc.requires.env == ("X",) and doc.always
    quoted = 'metadata: \'{"nanobot": {"requires": {"bins": "a, b"}}}\''
    assert parse_skill(md("name: t\ndescription: x\n" + quoted), "t").requires.bins == ("a", "b")
    top = parse_skill(md("name: t\ndescription: x\nalways: true"), "t")
    assert top.always


def test_plain_metadata_requirements_and_every_dialect_counts() -> None:
    front = (
        "name: t\ndescription: x\nmetadata:\n  requires: {bins: [jq], env: [A]}\n"
        "  nanobot: {requires: {bins: [tmux]}}\n  openclaw: {requires: {env: [B]}}"
    )
    doc = parse_skill(md(front), "t")
    assert doc.requires.bins == ("jq", "tmux") and doc.requires.env == ("A", "B")


def test_free_text_metadata_string_is_no_error() -> None:
    doc = parse_skill(md("name: t\ndescription: x\nmetadata: written by hand"), "t")
    assert doc.metadata == {} and doc.requires == Requirements()


def test_dates_in_metadata_become_text_so_json_output_works() -> None:
    doc = parse_skill(md("name: t\ndescription: x\nmetadata:\n  updated: 2025-01-02"), "t")
    assert doc.metadata == {"updated": "2025-01-02"}


def test_a_folded_description_is_one_line() -> None:
    doc = parse_skill(md("name: t\ndescription: >\n  one\n  two\n\n  three"), "t")
    assert doc.description == "one two three"


@settings(max_examples=300)
@given(st.text(max_size=400), st.text(alphabet="abc-", min_size=1, max_size=10))
def test_any_text_parses_or_gives_a_format_error(text: str, folder: str) -> None:
    for candidate in (text, "---\n" + text, "---\n" + text + "\n---\nbody"):
        try:
            doc = parse_skill(candidate, folder)
        except SkillFormatError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert doc.name == folder and 0 < len(doc.description) <= MAX_DESCRIPTION
