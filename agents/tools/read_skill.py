"""`read_skill {name, path?}`: a skill's instructions, or a file or folder beside them.

Only skills the prompt offers can be read: an unknown, invalid, unavailable or shadowed name is
a one-line error saying which it is. Without `path` the answer is the skill's instructions
(SKILL.md without its front matter, OpenClaw's `{baseDir}` made the folder exec sees), where
exec sees the folder, and the files beside it. With `path` (relative to the skill's folder:
no absolute path, no `..`) it is that file's text, or a folder's listing; every file is opened
through `agents.skills.files.open_in_skill`, so no symlink is followed and nothing outside the
folder is reached. Binary files and files over `max_bytes` are refused with what to do instead.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from agents.skills.catalog import SkillCatalog
from agents.skills.files import IsFolder, SkillFileError, TooLarge, read_file, tree
from agents.skills.skill import Skill
from agents.tools.base import ToolContext, ToolError, ToolResult

DEFAULT_MAX_BYTES = 200_000
_SNIFF = 8_192


class ReadSkillTool:
    """`read_skill`: progressive disclosure of the skills in the catalog."""

    name = "read_skill"
    description = (
        "Read a skill listed under Skills. With only name: its instructions, the folder exec "
        "sees it at and the files beside it; with path (in its folder, e.g. "
        "references/guide.md): that file, or that folder's listing."
    )
    input_schema: dict[str, Any] = {  # noqa: RUF012 (read-only schema, as the other tools')
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, as listed."},
            "path": {
                "type": "string",
                "description": "A file or folder inside the skill's folder (leave out for the "
                "instructions).",
            },
        },
        "required": ["name"],
    }

    def __init__(
        self,
        catalog: SkillCatalog,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        hidden: Sequence[Path] = (),
    ) -> None:
        self.catalog = catalog
        self.max_bytes = max_bytes
        # What no tool may read (the daemon's secret files, config, state), wherever it lies:
        # a secret file beside a skill's SKILL.md is inside the boundary too.
        self.hidden = tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in hidden))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ToolError("missing argument 'name': the name of a skill listed under Skills")
        skill = self._usable(name.strip())
        path = args.get("path")
        if path is not None and not isinstance(path, str):
            raise ToolError(f"argument 'path' must be a string, got {type(path).__name__}")
        parts = _relative(path or "")
        if not parts or parts == ("SKILL.md",):
            return ToolResult(_instructions(skill))
        return ToolResult(self._file(skill, parts))

    def _usable(self, name: str) -> Skill:
        skill = self.catalog.find(name)
        if skill is None:
            names = ", ".join(s.name for s in self.catalog.available()) or "none"
            raise ToolError(f"no skill named {name!r}; the skills you can use: {names}")
        if skill.doc is None:
            raise ToolError(f"skill {name!r} is invalid: {skill.error}")
        if skill.missing:
            raise ToolError(
                f"skill {name!r} cannot be used on this machine: missing {', '.join(skill.missing)}"
            )
        return skill

    def _file(self, skill: Skill, parts: tuple[str, ...]) -> str:
        shown = "/".join(parts)
        real = Path(os.path.realpath(skill.source.base.joinpath(*skill.parts, *parts)))
        if any(real == h or real.is_relative_to(h) for h in self.hidden):
            raise ToolError(f"{shown} holds one of the daemon's secrets; no tool may read it")
        try:
            data = read_file(
                skill.source.base,
                (*skill.parts, *parts),
                self.max_bytes,
                shown=shown,
                refuse_links=skill.source.kind == "workspace",
            )
        except IsFolder:
            listing = tree(skill.source.base, (*skill.parts, *parts), depth=1)
            return "\n".join(listing) if listing else f"{shown}/ is empty"
        except TooLarge as exc:
            raise ToolError(
                f"{shown} is {exc.size:,} bytes, over read_skill's {self.max_bytes:,}; look at "
                f"it with exec (head, grep) at {skill.location}/{shown}"
            ) from None
        except SkillFileError as exc:
            raise ToolError(str(exc)) from None
        if b"\x00" in data[:_SNIFF]:
            return (
                f"{shown} is a binary file ({len(data):,} bytes); use it with exec at "
                f"{skill.location}/{shown}"
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{shown} is not UTF-8 text; use it with exec") from None


def _relative(path: str) -> tuple[str, ...]:
    """The components of a path inside a skill's folder, or ToolError."""
    if "\x00" in path:
        raise ToolError("path contains a NUL byte; give a plain relative path")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise ToolError(f"path {path!r} is absolute; give a path inside the skill's folder")
    if ".." in pure.parts:
        raise ToolError(f"path {path!r} contains '..'; paths stay inside the skill's folder")
    return tuple(part for part in pure.parts if part != ".")


def _instructions(skill: Skill) -> str:
    files = tree(skill.source.base, skill.parts)
    lines = [
        f"# Skill {skill.name}",
        f"Folder for exec: {skill.location}",
        "",
        skill.body().strip() or "(this skill has no instructions beyond its description)",
    ]
    if files:
        lines += ["", "Files in this skill (read_skill with path reads one):", *files]
    return "\n".join(lines)
