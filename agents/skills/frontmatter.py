"""One SKILL.md read as the Agent Skills format: its front matter, its rules, its requirements.

`parse_skill(text, folder)` splits a SKILL.md into YAML front matter and body and checks the
format's rules (agentskills.io/specification): `name` of 1-64 lowercase letters, digits and
single inner hyphens, matching its folder; `description` of 1-1024 characters; `compatibility`
at most 500; `metadata` a mapping; `license` and `allowed-tools` optional; other keys (OpenClaw's
`homepage`, `user-invocable` ...) are let through. Requirements are read wherever OpenClaw,
nanobot and plain skills write them and all of them count: `metadata.openclaw` (and its older
names `clawdbot`, `moltbot`), `metadata.nanobot`, `metadata` itself, each with
`requires: {bins, anyBins, env}`, `os` and `always`, plus a top-level `always` (nanobot).
`metadata` written as a JSON string (older nanobot skills) is read as JSON. Every problem is a
`SkillFormatError` saying what to fix; nothing here touches the disk.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import yaml

MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_FRONT_MATTER = 64 * 1024  # characters; the rest of the file is the body
MAX_VALUES = 5_000  # values in the front matter, aliases counted each time they are used
MAX_LIST = 64  # entries kept per requirement list

_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_FENCE = "---"
_DIALECTS = ("openclaw", "clawdbot", "moltbot", "nanobot")
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it: ~8x faster
_THIS_OS = {"linux": {"linux"}, "darwin": {"darwin", "macos", "mac"}, "win32": {"win32", "windows"}}


class SkillFormatError(ValueError):
    """A SKILL.md that does not follow the format; the text says what to change."""


@dataclass(frozen=True, slots=True)
class Requirements:
    """What must be on this machine for a skill to work."""

    bins: tuple[str, ...] = ()  # every one on PATH
    any_bins: tuple[str, ...] = ()  # at least one on PATH
    env: tuple[str, ...] = ()  # every one set and not empty
    os: tuple[str, ...] = ()  # this platform among them (empty: any)

    def wrong_os(self) -> str:
        """ "" when this platform is allowed, else what it is."""
        if not self.os:
            return ""
        here = _THIS_OS.get(sys.platform, {sys.platform})
        return "" if here & set(self.os) else sys.platform


@dataclass(frozen=True, slots=True)
class SkillDoc:
    """A SKILL.md that follows the format."""

    name: str
    description: str
    body: str
    license: str = ""
    compatibility: str = ""
    allowed_tools: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)  # JSON-safe copy
    always: bool = False
    requires: Requirements = field(default_factory=Requirements)


def split_front_matter(text: str) -> tuple[str, str, int]:
    """(front matter, body, line of the body) of a SKILL.md; the file must open with `---`."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if lines[0].rstrip() != _FENCE:
        raise SkillFormatError(
            "no front matter: SKILL.md must start with a --- line, then name: and "
            "description:, then another --- line"
        )
    for index in range(1, len(lines)):
        if lines[index].rstrip() in (_FENCE, "..."):
            front = "\n".join(lines[1:index])
            return front, "\n".join(lines[index + 1 :]), index + 2
    raise SkillFormatError("the front matter is never closed: add a --- line after it")


def parse_skill(text: str, folder: str) -> SkillDoc:
    """The checked content of a SKILL.md whose folder is named `folder`."""
    front, body, _ = split_front_matter(text)
    if len(front) > MAX_FRONT_MATTER:
        raise SkillFormatError(
            f"the front matter is {len(front):,} characters; at most {MAX_FRONT_MATTER:,}"
        )
    data = _load_yaml(front)
    name = _name(data.get("name"), folder)
    description = _text(data.get("description"), "description", MAX_DESCRIPTION, required=True)
    compatibility = _text(data.get("compatibility"), "compatibility", MAX_COMPATIBILITY)
    metadata = _metadata(data.get("metadata"))
    blocks = [metadata, *(b for key in _DIALECTS if isinstance(b := metadata.get(key), dict))]
    return SkillDoc(
        name=name,
        description=" ".join(description.split()),
        body=body.strip("\n"),
        license="" if data.get("license") is None else str(data["license"]),
        compatibility=compatibility,
        allowed_tools=_words(data.get("allowed-tools")),
        metadata=metadata,
        always=_true(data.get("always")) or any(_true(b.get("always")) for b in blocks),
        requires=_requirements(blocks),
    )


def _load_yaml(front: str) -> dict[str, Any]:
    try:
        data = yaml.load(front, Loader=_LOADER)  # a safe loader, C or Python
    except RecursionError:
        raise SkillFormatError("the front matter is nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" on line {mark.line + 2}" if mark is not None else ""  # +1: the --- line
        problem = getattr(exc, "problem", None) or "cannot be read"
        raise SkillFormatError(f"the front matter is not valid YAML{where}: {problem}") from None
    if data is None:
        raise SkillFormatError("the front matter is empty; it needs name: and description:")
    if not isinstance(data, dict):
        raise SkillFormatError(
            f"the front matter must be keys and values (name: ..., description: ...), "
            f"not a {type(data).__name__}"
        )
    _count_values(data)
    return {str(key): value for key, value in data.items()}


def _count_values(tree: object) -> None:
    """Refuse front matter whose values (aliases expanded) pass `MAX_VALUES`."""
    seen = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            raise SkillFormatError(f"the front matter holds over {MAX_VALUES:,} values")
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _name(value: object, folder: str) -> str:
    if value is None or value == "":
        raise SkillFormatError(f"no name in the front matter (add name: {folder})")
    if not isinstance(value, str):
        raise SkillFormatError(f"name must be text, not {type(value).__name__}")
    if len(value) > MAX_NAME:
        raise SkillFormatError(f"name is {len(value)} characters; at most {MAX_NAME}")
    if not _NAME.match(value):
        raise SkillFormatError(
            f"name {value!r} may hold only lowercase letters, digits and single hyphens "
            "(not first or last)"
        )
    if value != folder:
        raise SkillFormatError(
            f"name {value!r} does not match its folder {folder!r}; rename one of them"
        )
    return value


def _text(value: object, key: str, limit: int, *, required: bool = False) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise SkillFormatError(
                f"no {key} in the front matter (say what the skill does and when to use it)"
            )
        return ""
    if not isinstance(value, str):
        raise SkillFormatError(f"{key} must be text, not {type(value).__name__}")
    text = value.strip()
    if len(text) > limit:
        raise SkillFormatError(f"{key} is {len(text):,} characters; at most {limit:,}")
    return text


def _metadata(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):  # `metadata: '{"nanobot": {...}}'`, as older skills write it
        try:
            value = json.loads(value)
        except ValueError:
            return {}  # free text: nothing Perch reads, nothing wrong
        if not isinstance(value, dict):
            return {}
    if not isinstance(value, dict):
        raise SkillFormatError(f"metadata must be keys and values, not a {type(value).__name__}")
    safe = _json_safe(value)
    assert isinstance(safe, dict)
    return safe


def _json_safe(value: object) -> object:
    """A copy that `json.dumps` takes: string keys, dates as ISO text (sizes already capped)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _requirements(blocks: list[dict[str, Any]]) -> Requirements:
    bins: list[str] = []
    any_bins: list[str] = []
    env: list[str] = []
    systems: list[str] = []
    for block in blocks:
        requires = block.get("requires")
        if isinstance(requires, Mapping):
            bins += _words(requires.get("bins"), commas=True)
            any_bins += _words(requires.get("anyBins", requires.get("any_bins")), commas=True)
            env += _words(requires.get("env"), commas=True)
        systems += [s.lower() for s in _words(block.get("os"), commas=True)]
    return Requirements(_unique(bins), _unique(any_bins), _unique(env), _unique(systems))


def _words(value: object, *, commas: bool = False) -> tuple[str, ...]:
    """A list of names from a YAML list or a space- (or comma-) separated string."""
    if isinstance(value, str):
        items = value.replace(",", " ").split() if commas else value.split()
    elif isinstance(value, list):
        items = [str(item).strip() for item in value if item is not None and str(item).strip()]
    else:
        return ()
    return tuple(items[:MAX_LIST])


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))[:MAX_LIST]


def _true(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes"))
