"""Every skill of every source, found, checked and kept fresh: `SkillCatalog`.

Sources are looked at in order (the workspace's `skills/`, then each `skills.paths` folder,
then the bundled skills); the first folder of a name wins and later ones are listed as
shadowed. `refresh()` is called whenever the list is asked for (each turn's prompt, each
`read_skill`), so a skill added, changed or removed counts from the next turn on, without a
restart. It costs one `stat` per source folder and one per SKILL.md while nothing changed: a
folder is listed again only when its own stamp (inode, mtime) moved, a SKILL.md parsed again
only when its stamp (inode, mtime, size) moved, and a stamp younger than `SETTLE_S` is not
trusted yet (a write within the clock's tick would leave it unchanged). Requirements (`bins`
on PATH, `env` set) are looked at again every `recheck_s`. A folder that cannot be read,
parsed or checked becomes an invalid entry with its reason; nothing here raises.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agents.skills.files import Entry, SkillFileError, TooLarge, list_folder, read_file
from agents.skills.frontmatter import Requirements, SkillDoc, SkillFormatError, parse_skill
from agents.skills.listing import listed_in_full
from agents.skills.skill import Skill, SkillSource

log = logging.getLogger(__name__)

MAX_SKILL_BYTES = 256 * 1024  # a SKILL.md over this is invalid (the spec asks for < 500 lines)
MAX_FOLDERS = 500  # skill folders looked at per source
SETTLE_S = 2.0  # a stamp younger than this may still change within the clock's resolution
MOUNT_ROOT = "/skills"

Stamp = tuple[int, int, int]


@dataclass(slots=True)
class _Listing:
    stamp: Stamp | None
    entries: list[Entry] = field(default_factory=list)
    problem: str = ""
    settled: bool = True


@dataclass(slots=True)
class _Parsed:
    stamp: Stamp | None
    doc: SkillDoc | None
    error: str
    real: str
    settled: bool
    missing: tuple[str, ...] = ()
    checked_at: float = float("-inf")
    built: Skill | None = None  # the Skill made from this, reused while nothing moved


class SkillCatalog:
    """The skills of `sources`; `mount_root` None means exec sees folders at their real path."""

    def __init__(
        self,
        sources: Sequence[SkillSource],
        *,
        workspace: Path | None = None,
        mount_root: str | None = MOUNT_ROOT,
        max_skill_bytes: int = MAX_SKILL_BYTES,
        recheck_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        which: Callable[[str], str | None] = shutil.which,
        environ: Mapping[str, str] | None = None,
        search_above: int = 0,
    ) -> None:
        self.sources = tuple(sources)
        self.search_above = search_above  # more usable skills: search mode (listing.py)
        self.mount_root = mount_root
        self.max_skill_bytes = max_skill_bytes
        self.recheck_s = recheck_s
        self._workspace = os.path.realpath(workspace) if workspace is not None else None
        self._clock = clock
        self._which = which
        self._environ = os.environ if environ is None else environ
        self._listings: dict[int, _Listing] = {}
        self._parsed: dict[tuple[int, str], _Parsed] = {}
        self._skills: tuple[Skill, ...] = ()
        self._generation = 0

    @property
    def generation(self) -> int:
        """Changes whenever `refresh()` finds a different set of skills."""
        return self._generation

    def skills(self) -> tuple[Skill, ...]:
        """Every skill folder found (valid, unavailable, shadowed, invalid), by name."""
        return self.refresh()

    def available(self) -> list[Skill]:
        """The skills the model may use, by name."""
        return [skill for skill in self.refresh() if skill.available]

    def find(self, name: str) -> Skill | None:
        """The winning folder called `name` (valid or not), or None."""
        for skill in self.refresh():
            if skill.folder_name == name and skill.shadowed_by is None:
                return skill
        return None

    def search_mode(self) -> bool:
        """Whether the prompt lists only the `always` skills, as of the last look (the prompt
        looks each turn): then `skill_search` finds the others."""
        return not listed_in_full(self._skills, self.search_above)

    def mounts(self) -> list[tuple[Path, str]]:
        """(real folder, where exec sees it) for each available skill outside the workspace."""
        return [(s.mount, s.location) for s in self.available() if s.mount is not None]

    def problems(self) -> list[str]:
        """One line per source folder that could not be listed."""
        self.refresh()
        return [listing.problem for listing in self._listings.values() if listing.problem]

    def refresh(self) -> tuple[Skill, ...]:
        """Look at the sources again (cheaply when nothing changed); the skills found."""
        now = self._clock()
        found: list[Skill] = []
        winners: dict[str, Skill] = {}
        for index, source in enumerate(self.sources):
            try:
                listing = self._listing(index, source)
            except Exception as exc:  # never let a strange folder break a turn
                log.warning("skills: cannot list %s: %s", source.folder, exc)
                continue
            folder = os.fspath(source.folder)  # str paths: pathlib costs more than the stat
            for entry in listing.entries:
                if entry.kind == "file":
                    continue
                skill = self._skill(index, source, folder, entry, now)
                first = winners.get(skill.folder_name)
                if first is not None:
                    skill = _shadowed(skill, first.path)
                else:
                    winners[skill.folder_name] = skill
                found.append(skill)
        skills = tuple(sorted(found, key=lambda s: s.folder_name))
        if skills != self._skills:
            self._skills = skills
            self._generation += 1
        return self._skills

    # -- one source folder -----------------------------------------------------------------

    def _listing(self, index: int, source: SkillSource) -> _Listing:
        path = source.folder
        cached = self._listings.get(index)
        try:
            st = os.stat(path, follow_symlinks=not source.under)
        except FileNotFoundError:
            missing = f"{path}: no such folder (skills.paths)" if source.kind == "path" else ""
            listing = _Listing(None, problem=missing)
            self._listings[index] = listing
            return listing
        except OSError as exc:
            listing = _Listing(None, problem=f"{path}: cannot be read ({exc.strerror})")
            self._listings[index] = listing
            return listing
        stamp = (st.st_ino, st.st_mtime_ns, st.st_mode)
        if cached is not None and cached.stamp == stamp and cached.settled:
            return cached
        settled = _settled(st.st_mtime_ns)
        if stat.S_ISLNK(st.st_mode):
            listing = _Listing(
                stamp, problem=f"{path} is a symbolic link; refused", settled=settled
            )
        else:
            try:
                entries = list_folder(source.base, source.under)
                listing = _Listing(stamp, entries[:MAX_FOLDERS], settled=settled)
                if len(entries) > MAX_FOLDERS:
                    listing.problem = f"{path}: over {MAX_FOLDERS} folders; the rest are ignored"
            except SkillFileError as exc:
                listing = _Listing(stamp, problem=str(exc), settled=settled)
        self._listings[index] = listing
        return listing

    # -- one skill folder ------------------------------------------------------------------

    def _skill(
        self, index: int, source: SkillSource, folder: str, entry: Entry, now: float
    ) -> Skill:
        name = entry.name
        if entry.kind == "link":
            return Skill(
                name,
                source,
                f"{folder}/{name}",
                error="is a symbolic link; skill folders are not followed through links "
                "(copy the folder, or add its real parent folder to skills.paths)",
            )
        parsed = self._parse(index, source, f"{folder}/{name}")
        if parsed.doc is None:
            return Skill(name, source, parsed.real, error=parsed.error)
        if now - parsed.checked_at >= self.recheck_s:
            missing = self._missing(parsed.doc.requires)
            if missing != parsed.missing:
                parsed.missing, parsed.built = missing, None
            parsed.checked_at = now
        if parsed.built is None:
            location, mount = self._place(name, parsed.real)
            parsed.built = Skill(
                name, source, location, parsed.doc, missing=parsed.missing, mount=mount
            )
        return parsed.built

    def _parse(self, index: int, source: SkillSource, folder: str) -> _Parsed:
        name = os.path.basename(folder)
        key = (index, name)
        cached = self._parsed.get(key)
        try:
            st = os.stat(f"{folder}/SKILL.md", follow_symlinks=False)
            stamp: Stamp | None = (st.st_ino, st.st_mtime_ns, st.st_size)
            settled = _settled(st.st_mtime_ns)
        except OSError:
            stamp, settled = None, True
        if cached is not None and cached.stamp == stamp and cached.settled and stamp:
            return cached
        real = os.path.realpath(folder)
        doc: SkillDoc | None = None
        error = ""
        if stamp is None:
            error = _no_skill_md(source, name)
        else:
            try:
                doc = self._read(source, name)
            except TooLarge as exc:
                error = (
                    f"SKILL.md is {exc.size:,} bytes; skills are read up to "
                    f"{self.max_skill_bytes:,} (move details into references/ files)"
                )
            except (SkillFileError, SkillFormatError) as exc:
                error = str(exc)
            except Exception as exc:  # whatever a hostile file does, the turn goes on
                log.warning("skills: %s could not be read: %r", folder, exc)
                error = f"SKILL.md could not be read ({type(exc).__name__})"
        parsed = _Parsed(stamp, doc, error, real, settled)
        self._parsed[key] = parsed
        return parsed

    def _read(self, source: SkillSource, name: str) -> SkillDoc:
        data = read_file(
            source.base,
            (*source.under, name, "SKILL.md"),
            self.max_skill_bytes,
            shown="SKILL.md",
            refuse_links=source.kind == "workspace",
        )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillFormatError("SKILL.md is not UTF-8 text") from None
        return parse_skill(text, name)

    def _missing(self, requires: Requirements) -> tuple[str, ...]:
        missing = [f"bin {b}" for b in requires.bins if not self._which(b)]
        if requires.any_bins and not any(self._which(b) for b in requires.any_bins):
            missing.append(f"one of the bins {', '.join(requires.any_bins)}")
        missing += [f"env {v}" for v in requires.env if not self._environ.get(v)]
        if wrong := requires.wrong_os():
            missing.append(f"os {', '.join(requires.os)} (this is {wrong})")
        return tuple(missing)

    def _place(self, name: str, real: str) -> tuple[str, Path | None]:
        """Where exec sees the folder, and the real folder to bind there (if any)."""
        inside = self._workspace is not None and (
            real == self._workspace or real.startswith(self._workspace + os.sep)
        )
        if inside or self.mount_root is None:
            return real, None  # the workspace is bound as it is; or exec runs unsandboxed
        return f"{self.mount_root}/{name}", Path(real)


def _shadowed(skill: Skill, first: Path) -> Skill:
    return Skill(
        skill.folder_name,
        skill.source,
        skill.location,
        skill.doc,
        skill.error,
        skill.missing,
        shadowed_by=first,
    )


def _settled(mtime_ns: int) -> bool:
    return time.time_ns() - mtime_ns > SETTLE_S * 1e9


def _no_skill_md(source: SkillSource, name: str) -> str:
    try:
        names = [e.name for e in list_folder(source.base, (*source.under, name))]
    except SkillFileError as exc:
        return str(exc)
    near = [n for n in names if n.lower() == "skill.md"]
    if near:
        return f"no SKILL.md in this folder (found {near[0]}: the name must be SKILL.md)"
    return "no SKILL.md in this folder"
