"""The configuration reference, generated from `config.yaml`'s own comments when the site builds.

An MkDocs hook (`hooks:` in mkdocs.yml): on the page that holds the marker
`<!-- config-reference -->` it puts one entry per key of the top-level `config.yaml`, in the
file's order, each with its default and the comment written beside it (with the comment
lines that continue it). Keys written inside a flow mapping (`queue: {mode: collect, cap: 20}`)
get an entry each under their owner. Comment lines that stand alone (commented-out examples)
follow their section as YAML. So every key is documented exactly once, by the file that
ships it, and a key added to `config.yaml` is in the manual at the next build.

`reference_entries(text)` is the pure part (tests/docs/test_config_reference.py checks it
against the YAML tree); `render(text)` makes the Markdown.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MARKER = "<!-- config-reference -->"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_-]*):(?:\s+(?P<value>.*))?$")


@dataclass
class Entry:
    """One key of config.yaml: its dotted name, default, comment and whether it is a section."""

    key: str
    default: Any
    comment: str = ""
    section: bool = False  # a block mapping: its keys follow as entries of their own
    inline: bool = False  # written inside its owner's flow mapping, not on a line of its own


@dataclass
class Section:
    """A top-level key: its entries and the stand-alone comment lines written inside it."""

    name: str
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def split_comment(line: str) -> tuple[str, str | None]:
    """`line` without its trailing `# comment`, and the comment (None when there is none).
    A `#` counts only at the start or after a blank, and outside quotes, as in YAML."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'" and (i == 0 or line[i - 1] in " :[{,"):
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), None


def line_comments(text: str) -> tuple[str, dict[str, str], dict[str, list[str]]]:
    """The file's opening comment, each block key's comment by dotted name (a top-level key's
    also gets the comment lines at the margin just above it), and each top-level section's
    stand-alone comment lines."""
    header: list[str] = []
    comments: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    above: list[str] = []  # comment lines at the margin, for the next top-level key
    stack: list[tuple[int, str]] = []  # (indent, key) of the keys enclosing the current line
    last: tuple[int, str] | None = None  # the key line a comment may continue
    for raw in text.splitlines():
        code, comment = split_comment(raw)
        if not code.strip():
            if comment is None:
                last = None if not raw.strip() else last
                continue
            column = len(raw) - len(raw.lstrip())
            if not stack:
                header.append(comment)
            elif column == 0:
                above.append(comment)
                last = None
            elif last is not None and column > last[0]:  # a continuation of the key's comment
                comments[last[1]] = f"{comments.get(last[1], '')} {comment}".strip()
            else:
                last = None
                notes.setdefault(stack[0][1], []).append(raw.rstrip())
            continue
        match = KEY_LINE.match(code)
        if match is None:
            last = None
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([k for _, k in stack] + [match["key"]])
        stack.append((indent, match["key"]))
        if indent == 0 and above:
            comment = " ".join([*above, comment or ""]).strip()
            above = []
        if comment:
            comments[dotted] = comment
        last = (indent, dotted) if comment else None
    return " ".join(header), comments, notes


def reference_entries(text: str) -> tuple[str, list[Section]]:
    """The opening comment and, per top-level key, the entries of every key under it."""
    header, comments, notes = line_comments(text)
    tree = yaml.safe_load(text) or {}
    written = block_keys(text)
    sections: list[Section] = []
    for name, value in tree.items():
        section = Section(name, notes=notes.get(name, []))
        walk(name, value, comments, written, section.entries, inline=False)
        sections.append(section)
    return header, sections


def block_keys(text: str) -> set[str]:
    """The dotted names of the keys written on lines of their own (not inside `{...}`)."""
    keys: set[str] = set()
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        code, _ = split_comment(raw)
        match = KEY_LINE.match(code) if code.strip() else None
        if match is None:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        keys.add(".".join(k for _, k in stack))
    return keys


def walk(
    dotted: str,
    value: Any,
    comments: dict[str, str],
    written: set[str],
    out: list[Entry],
    *,
    inline: bool,
) -> None:
    here_inline = inline or dotted not in written
    block = isinstance(value, dict) and value and f"{dotted}.{next(iter(value))}" in written
    out.append(
        Entry(dotted, None if block else value, comments.get(dotted, ""), bool(block), here_inline)
    )
    if isinstance(value, dict):
        for key, child in value.items():
            walk(f"{dotted}.{key}", child, comments, written, out, inline=here_inline)


def shown(value: Any) -> str:
    """A default as YAML on one line."""
    if isinstance(value, str):
        return value if value else '""'
    dumped = yaml.safe_dump(
        value, default_flow_style=True, width=10_000, allow_unicode=True, sort_keys=False
    )
    return dumped.strip().removesuffix("...").strip()


def escape(text: str) -> str:
    """Comment text as Markdown that shows it as written (no emphasis, tags or links)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\\`*_\[\]|#])", r"\\\1", text)


def render(text: str) -> str:
    """The reference as Markdown: a heading per section, a list entry per key."""
    header, sections = reference_entries(text)
    lines = [escape(header), ""] if header else []
    for section in sections:
        lines += [f"### `{section.name}`", ""]
        for entry in section.entries:
            depth = entry.key.count(".")
            bullet = "    " * max(depth - 1, 0) + "- "
            if depth == 0:
                if entry.comment:
                    lines += [escape(entry.comment), ""]
                if not entry.section:
                    lines += [f"Default: `{shown(entry.default)}`", ""]
                continue
            what = escape(entry.comment) if entry.comment else ""
            if entry.inline and not what:
                what = f"part of `{entry.key.rsplit('.', 1)[0]}`"
            if entry.section:
                lines.append(f"{bullet}**`{entry.key}`**" + (f": {what}" if what else ""))
            else:
                default = shown(entry.default).replace("`", "'")
                lines.append(f"{bullet}`{entry.key}` = `{default}`" + (f": {what}" if what else ""))
        if section.notes:
            notes = textwrap.dedent("\n".join(section.notes)).splitlines()
            lines += ["", "Also in the file, as comments:", "", "```yaml", *notes, "```"]
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: fill the marker with the reference made from the top-level config.yaml."""
    if MARKER not in markdown:
        return markdown
    source = Path(config["config_file_path"]).parent / "config.yaml"
    return markdown.replace(MARKER, render(source.read_text(encoding="utf-8")))
