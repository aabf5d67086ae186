"""What a skill is once found: where it came from, whether it can be used, and why not.

A `SkillSource` is one place skills are looked for (`<workspace>/skills`, a `skills.paths`
folder, the bundled ones). A `Skill` is one folder found there: valid (`doc` set) or invalid
(`error` says why), available or not (`missing` names what this machine lacks; `shadowed_by`
names the earlier folder of the same name that wins). `location` is where the model's `exec`
sees the folder: `/skills/<name>` inside the sandbox for skills outside the workspace, else
the folder's real path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agents.skills.frontmatter import SkillDoc

SourceKind = Literal["workspace", "path", "bundled"]
BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"


@dataclass(frozen=True, slots=True)
class SkillSource:
    """Skill folders live in `base` / `under`; `base` is opened as given (it may be a link,
    the owner's choice), nothing below it is followed if it is a link."""

    kind: SourceKind
    base: Path
    under: tuple[str, ...] = ()

    @property
    def folder(self) -> Path:
        return self.base.joinpath(*self.under)


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill folder as found on the last look."""

    folder_name: str
    source: SkillSource
    location: str  # where exec sees the folder
    doc: SkillDoc | None = None
    error: str = ""  # why the folder is not a usable skill ("" when doc is set)
    missing: tuple[str, ...] = ()  # what this machine lacks: "bin gh", "env GITHUB_TOKEN"
    shadowed_by: Path | None = None  # an earlier folder of the same name wins
    mount: Path | None = None  # the real folder bound read-only at `location` for exec

    @property
    def name(self) -> str:
        return self.doc.name if self.doc is not None else self.folder_name

    @property
    def description(self) -> str:
        return self.doc.description if self.doc is not None else ""

    @property
    def path(self) -> Path:
        return self.source.folder / self.folder_name

    @property
    def parts(self) -> tuple[str, ...]:
        """The folder's components beneath `source.base`."""
        return (*self.source.under, self.folder_name)

    @property
    def always(self) -> bool:
        return self.doc is not None and self.doc.always

    @property
    def available(self) -> bool:
        return self.doc is not None and not self.missing and self.shadowed_by is None

    @property
    def state(self) -> str:
        """ "available", "unavailable", "shadowed" or "invalid"."""
        if self.doc is None:
            return "invalid"
        if self.shadowed_by is not None:
            return "shadowed"
        return "unavailable" if self.missing else "available"

    def body(self) -> str:
        """The instructions, with OpenClaw's `{baseDir}` made the folder exec sees."""
        text = self.doc.body if self.doc is not None else ""
        return text.replace("{baseDir}", self.location)
