"""The configuration reference is made from config.yaml by the site's hook
(docs/hooks/config_reference.py): every key of the shipped file is in it exactly once, with
the comment written beside it, and the line reader agrees with a YAML parser on any file."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "config_reference", REPO / "docs" / "hooks" / "config_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


HOOK = load_hook()
SHIPPED = (REPO / "config.yaml").read_text(encoding="utf-8")


def dotted_keys(tree: Any, prefix: str = "") -> list[str]:
    keys: list[str] = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            name = f"{prefix}{key}"
            keys += [name, *dotted_keys(value, f"{name}.")]
    return keys


def test_every_key_of_config_yaml_is_in_the_reference_exactly_once() -> None:
    _, sections = HOOK.reference_entries(SHIPPED)
    listed = [entry.key for section in sections for entry in section.entries]
    assert sorted(listed) == sorted(dotted_keys(yaml.safe_load(SHIPPED)))
    page = HOOK.render(SHIPPED)
    for key in listed:
        if "." in key:  # a top-level key is its section's heading
            entry = rf"^ *- (?:\*\*)?`{re.escape(key)}`(?: = |\*\*|$)"  # its own list item
            assert len(re.findall(entry, page, re.M)) == 1, key


def test_every_setting_in_config_yaml_says_what_it_does() -> None:
    _, sections = HOOK.reference_entries(SHIPPED)
    by_key = {entry.key: entry for section in sections for entry in section.entries}
    silent = []
    for key, entry in by_key.items():
        owner = key.rsplit(".", 1)[0]
        explained = entry.comment or entry.section or (entry.inline and by_key[owner].comment)
        if not explained:
            silent.append(key)
    assert silent == [], f"give these keys a comment in config.yaml: {silent}"


def test_the_comment_beside_a_key_and_its_continuation_lines_are_its_description() -> None:
    text = (
        "# opening words\n"
        "a:\n"
        "  b: 1            # first part\n"
        "                  # second part\n"
        "  # c: 3          # an example, not b's\n"
        "  d: {e: x, f: [1, 2]}  # a flow map\n"
        "g: 'quoted # not a comment'  # the real one\n"
    )
    header, sections = HOOK.reference_entries(text)
    entries = {e.key: e for s in sections for e in s.entries}
    assert header == "opening words"
    assert entries["a.b"].comment == "first part second part"
    assert entries["a.d.e"].inline and entries["a.d"].comment == "a flow map"
    assert (
        entries["g"].comment == "the real one" and entries["g"].default == "quoted # not a comment"
    )
    assert sections[0].notes == ["  # c: 3          # an example, not b's"]


def test_markdown_in_a_comment_is_shown_as_written() -> None:
    page = HOOK.render("x:\n  y: 1  # <b>not bold</b> *or* [a](link) | pipe\n")
    assert "&lt;b&gt;not bold&lt;/b&gt; \\*or\\* \\[a\\](link) \\| pipe" in page


YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}  # not text to YAML 1.1
NAMES = st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True).filter(lambda n: n not in YAML_WORDS)
WORDS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ,.()-]{0,30}", fullmatch=True).map(str.strip)
TREES = st.recursive(
    st.integers(-1000, 1000),
    lambda children: st.dictionaries(NAMES, children, min_size=1, max_size=4),
    max_leaves=20,
)


def block_yaml(
    tree: dict[str, Any], comments: dict[str, str], indent: int = 0, at: str = ""
) -> str:
    lines = []
    for key, value in tree.items():
        name = f"{at}{key}"
        comment = f"  # {comments[name]}" if comments.get(name) else ""
        if isinstance(value, dict):
            lines.append(f"{' ' * indent}{key}:{comment}")
            lines.append(block_yaml(value, comments, indent + 2, f"{name}."))
        else:
            lines.append(f"{' ' * indent}{key}: {value}{comment}")
    return "\n".join(lines)


@given(tree=st.dictionaries(NAMES, TREES, min_size=1, max_size=4), words=st.lists(WORDS))
def test_the_reference_of_any_block_file_lists_its_keys_with_their_comments(
    tree: dict[str, Any], words: list[str]
) -> None:
    keys = dotted_keys(tree)
    comments = {key: words[i] for i, key in enumerate(keys) if i < len(words) and words[i]}
    text = block_yaml(tree, comments) + "\n"
    _, sections = HOOK.reference_entries(text)
    entries = {e.key: e for s in sections for e in s.entries}
    assert sorted(entries) == sorted(keys)
    for key in keys:
        assert entries[key].comment == comments.get(key, ""), key
