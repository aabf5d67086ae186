"""Finding skills: the three dialects as their folders come, requirements, precedence, bad
skills, and a catalog that sees changes on the next look without re-reading what did not move."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agents.skills.catalog import MAX_SKILL_BYTES, SkillCatalog
from agents.skills.skill import BUNDLED_DIR, SkillSource
from tests.skill_folders import (
    age,
    agentskills_skill,
    fake_bin,
    nanobot_skill,
    openclaw_skill,
    write_skill,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "skills").mkdir(parents=True)
    return tmp_path / "ws"


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with the system's programs and this folder, where tests put fake ones."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def catalog_for(ws: Path, *paths: Path, mount_root: str | None = "/skills") -> SkillCatalog:
    sources = [
        SkillSource("workspace", ws, ("skills",)),
        *(SkillSource("path", p) for p in paths),
        SkillSource("bundled", BUNDLED_DIR),
    ]
    return SkillCatalog(sources, workspace=ws, mount_root=mount_root)


def by_name(catalog: SkillCatalog) -> dict[str, object]:
    return {s.folder_name: s for s in catalog.skills() if s.shadowed_by is None}


def test_skills_of_each_dialect_work_as_they_come(
    ws: Path, tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    openclaw_skill(ws / "skills")
    nanobot_skill(shared)
    agentskills_skill(shared)
    fake_bin(bin_dir, "gh")
    fake_bin(bin_dir, "perch-test-tmux")
    monkeypatch.setenv("GH_TOKEN", "set")
    catalog = catalog_for(ws, shared)
    skills = {s.name: s for s in catalog.available()}
    assert sorted(skills) == ["gh-issues", "pdf-processing", "skill-creator", "tmux-control"]
    gh = skills["gh-issues"]
    assert gh.source.kind == "workspace" and gh.mount is None
    assert gh.location == os.path.realpath(ws / "skills" / "gh-issues")  # seen in the workspace
    assert f"{gh.location}/scripts/triage.sh" in gh.body()  # OpenClaw's {baseDir}
    pdf = skills["pdf-processing"]
    assert (
        pdf.location == "/skills/pdf-processing"
        and pdf.mount == (shared / "pdf-processing").resolve()
    )
    assert pdf.doc is not None and pdf.doc.license == "Apache-2.0"
    assert skills["skill-creator"].source.kind == "bundled"


def test_a_missing_binary_or_variable_makes_a_skill_unavailable_and_says_what(
    ws: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GH_TOKEN", raising=False)
    openclaw_skill(ws / "skills", bins='"gh", "perch-no-such-tool"')
    nanobot_skill(ws / "skills")
    fake_bin(bin_dir, "gh")
    skills = by_name(catalog_for(ws))
    gh, tmux = skills["gh-issues"], skills["tmux-control"]
    assert not gh.available and gh.missing == ("bin perch-no-such-tool", "env GH_TOKEN")
    assert (
        not tmux.available
        and tmux.missing == ("bin perch-test-tmux",)
        and tmux.state == "unavailable"
    )
    write_skill(
        ws / "skills",
        "any-python",
        '---\nname: any-python\ndescription: x\nmetadata: {"openclaw": {"requires": '
        '{"anyBins": ["perch-nope-1", "perch-nope-2"]}, "os": ["plan9"]}}\n---\n',
    )
    odd = by_name(catalog_for(ws))["any-python"]
    assert odd.missing == ("one of the bins perch-nope-1, perch-nope-2", "os plan9 (this is linux)")


def test_binaries_installed_later_are_noticed_on_the_next_requirement_check(
    ws: Path, bin_dir: Path
) -> None:
    folder = nanobot_skill(ws / "skills")
    for path in (folder / "SKILL.md", folder, ws / "skills"):
        age(path)  # an old skill: not read again, only its requirements looked at
    now = [0.0]
    catalog = SkillCatalog(
        [SkillSource("workspace", ws, ("skills",))], workspace=ws, clock=lambda: now[0]
    )
    assert catalog.available() == []
    fake_bin(bin_dir, "perch-test-tmux")
    now[0] = 30.0
    assert catalog.available() == []  # within recheck_s nothing is asked again
    now[0] = 61.0
    assert [s.name for s in catalog.available()] == ["tmux-control"]


def test_the_workspace_comes_first_then_paths_then_bundled(ws: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for root, words in ((ws / "skills", "mine"), (first, "first"), (second, "second")):
        write_skill(root, "skill-creator", f"---\nname: skill-creator\ndescription: {words}\n---\n")
    write_skill(second, "only-second", "---\nname: only-second\ndescription: s\n---\n")
    catalog = catalog_for(ws, first, second)
    creators = [s for s in catalog.skills() if s.name == "skill-creator"]
    assert [s.source.kind for s in creators] == ["workspace", "path", "path", "bundled"]
    assert creators[0].available and creators[0].description == "mine"
    assert all(s.shadowed_by == ws / "skills" / "skill-creator" for s in creators[1:])
    assert [s.name for s in catalog.available()] == ["only-second", "skill-creator"]
    assert catalog.find("skill-creator") is creators[0]


def test_bad_skills_are_listed_with_the_reason_and_the_good_ones_still_work(
    ws: Path, tmp_path: Path
) -> None:
    skills = ws / "skills"
    write_skill(skills, "no-front", "# only markdown\n")
    write_skill(skills, "bad-yaml", "---\nname: bad-yaml\ndescription: [unclosed\n---\n")
    write_skill(skills, "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n")
    huge = write_skill(skills, "huge", "---\nname: huge\ndescription: x\n---\n")
    with (huge / "SKILL.md").open("a") as fh:
        fh.write("x" * (5 * 1024 * 1024))
    (skills / "empty").mkdir()
    (skills / "lower").mkdir()
    (skills / "lower" / "skill.md").write_text("---\nname: lower\ndescription: x\n---\n")
    write_skill(skills, "not-utf8", "---\nname: not-utf8\ndescription: x\n---\n")
    (skills / "not-utf8" / "SKILL.md").write_bytes(b"---\nname: not-utf8\ndescription: \xff\n---\n")
    outside = write_skill(
        tmp_path / "elsewhere", "linked", "---\nname: linked\ndescription: x\n---\n"
    )
    (skills / "linked").symlink_to(outside)
    (skills / "md-link").mkdir()
    (skills / "md-link" / "SKILL.md").symlink_to(outside / "SKILL.md")
    hard = write_skill(tmp_path / "elsewhere", "hard", "---\nname: hard\ndescription: x\n---\n")
    (skills / "hard").mkdir()
    os.link(hard / "SKILL.md", skills / "hard" / "SKILL.md")
    (skills / "README.md").write_text("not a skill folder")
    agentskills_skill(skills)

    found = by_name(catalog_for(ws))
    errors = {name: s.error for name, s in found.items() if s.error}
    assert errors["no-front"].startswith("no front matter")
    assert "the front matter is not valid YAML on line" in errors["bad-yaml"]
    assert "lowercase letters, digits and single hyphens" in errors["Bad_Name"]
    size = (skills / "huge" / "SKILL.md").stat().st_size
    assert errors["huge"] == (
        f"SKILL.md is {size:,} bytes; skills are read up to {MAX_SKILL_BYTES:,} "
        "(move details into references/ files)"
    )
    assert errors["empty"] == "no SKILL.md in this folder"
    assert "found skill.md" in errors["lower"]
    assert errors["not-utf8"] == "SKILL.md is not UTF-8 text"
    assert errors["linked"].startswith("is a symbolic link")
    assert "symbolic link" in errors["md-link"]
    assert "hard links" in errors["hard"]
    assert "README.md" not in found
    assert found["pdf-processing"].available and found["skill-creator"].available


def test_an_unchanged_skill_set_is_not_read_again(ws: Path) -> None:
    folder = agentskills_skill(ws / "skills")
    age(folder / "SKILL.md")
    age(folder)
    age(ws / "skills")
    catalog = catalog_for(ws)
    first = catalog.skills()
    generation = catalog.generation
    again = catalog.skills()
    assert again is first and catalog.generation == generation
    pdf = next(s for s in again if s.name == "pdf-processing")
    assert pdf.doc is next(s for s in first if s.name == "pdf-processing").doc  # not re-parsed


def test_added_changed_and_removed_skills_count_on_the_next_look(ws: Path) -> None:
    catalog = catalog_for(ws)
    assert [s.name for s in catalog.available()] == ["skill-creator"]
    generation = catalog.generation
    write_skill(ws / "skills", "weekly", "---\nname: weekly\ndescription: first\n---\nv1\n")
    assert [s.name for s in catalog.available()] == ["skill-creator", "weekly"]
    assert catalog.generation > generation
    write_skill(ws / "skills", "weekly", "---\nname: weekly\ndescription: second\n---\nv2\n")
    weekly = catalog.find("weekly")
    assert weekly is not None and weekly.description == "second" and weekly.body() == "v2"
    write_skill(ws / "skills", "weekly", "---\nname: Weekly\ndescription: third\n---\n")
    broken = catalog.find("weekly")
    assert broken is not None and not broken.available and "lowercase" in broken.error
    shutil.rmtree(ws / "skills" / "weekly")
    assert catalog.find("weekly") is None
    assert [s.name for s in catalog.available()] == ["skill-creator"]


def test_a_missing_workspace_folder_is_quiet_and_a_missing_path_is_noted(ws: Path) -> None:
    shutil.rmtree(ws / "skills")
    catalog = catalog_for(ws, ws.parent / "nowhere")
    assert [s.name for s in catalog.available()] == ["skill-creator"]
    assert catalog.problems() == [f"{ws.parent / 'nowhere'}: no such folder (skills.paths)"]


def test_a_workspace_skills_folder_that_is_a_link_is_refused(ws: Path, tmp_path: Path) -> None:
    shutil.rmtree(ws / "skills")
    agentskills_skill(tmp_path / "real")
    (ws / "skills").symlink_to(tmp_path / "real")
    catalog = catalog_for(ws)
    assert [s.name for s in catalog.available()] == ["skill-creator"]
    assert catalog.problems() == [f"{ws / 'skills'} is a symbolic link; refused"]


def test_mounts_are_the_available_skills_outside_the_workspace(
    ws: Path, tmp_path: Path, bin_dir: Path
) -> None:
    shared = tmp_path / "shared"
    agentskills_skill(shared)
    nanobot_skill(shared)  # its binary is missing: not mounted
    openclaw_skill(ws / "skills", bins='"sh"')
    mounts = dict((inside, folder) for folder, inside in catalog_for(ws, shared).mounts())
    assert mounts == {
        "/skills/pdf-processing": (shared / "pdf-processing").resolve(),
        "/skills/skill-creator": BUNDLED_DIR / "skill-creator",
    }
    unsandboxed = catalog_for(ws, shared, mount_root=None)
    assert unsandboxed.mounts() == []
    pdf = unsandboxed.find("pdf-processing")
    assert pdf is not None and pdf.location == str((shared / "pdf-processing").resolve())
