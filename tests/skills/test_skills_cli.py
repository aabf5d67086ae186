"""`perch skills list`, and the skills in `perch status` and `perch doctor`: from the folders
themselves, with no daemon and no model key; and the bundled skills ship in the package."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import tomllib
from pathlib import Path

import pytest

from agents.skills.skill import BUNDLED_DIR
from bot.config.load import load_config
from bot.operator.cli import main
from bot.operator.doctor_skills import skill_checks
from bot.store.open import open_store
from tests.skill_folders import agentskills_skill, nanobot_skill, write_skill

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    skills = tmp_path / "workspace" / "skills"
    agentskills_skill(skills)
    nanobot_skill(skills)
    write_skill(skills, "broken", "# no front matter\n")
    shared = tmp_path / "team-skills"
    write_skill(shared, "pdf-processing", "---\nname: pdf-processing\ndescription: t\n---\n")
    path = tmp_path / "config.yaml"
    path.write_text(
        "agent: {workspace: ./workspace}\n"
        "providers: {anthropic: {api_key: '${ANTHROPIC_API_KEY}'}}\n"
        "skills: {paths: [./team-skills, ./missing-folder]}\n"
        "channels: {console: {enabled: false}}\n"
    )
    return path


def test_skills_list_json_without_daemon_or_key(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["skills", "list", "--json", "--config", str(config)]) == 0
    records = {(r["name"], r["source"]): r for r in json.loads(capsys.readouterr().out)}
    ws = config.parent / "workspace" / "skills"
    pdf = records[("pdf-processing", "workspace")]
    assert pdf == {
        "name": "pdf-processing",
        "description": pdf["description"],
        "source": "workspace",
        "available": True,
        "missing": [],
        "path": str(ws / "pdf-processing"),
        "state": "available",
        "always": False,
        "location": str((ws / "pdf-processing").resolve()),
    }
    assert pdf["description"].startswith("Extract text and tables from PDF files")
    tmux = records[("tmux-control", "workspace")]
    assert tmux["available"] is False and tmux["missing"] == ["bin perch-test-tmux"]
    broken = records[("broken", "workspace")]
    assert broken["state"] == "invalid" and broken["error"].startswith("no front matter")
    hidden = records[("pdf-processing", "path")]
    assert hidden["state"] == "shadowed" and hidden["shadowed_by"] == str(ws / "pdf-processing")
    assert records[("skill-creator", "bundled")]["available"] is True


def test_skills_list_text_names_state_and_reason(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["skills", "list", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "tmux-control    workspace  unavailable" in out
    assert "missing bin perch-test-tmux" in out
    assert "broken          workspace  invalid" in out
    assert f"note: {config.parent / 'missing-folder'}: no such folder (skills.paths)" in out


async def test_status_without_daemon_counts_the_skills(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (config.parent / "data").mkdir()
    store = await open_store(config.parent / "data" / "perch.db")  # a daemon ran here once
    await store.close()
    assert await asyncio.to_thread(main, ["status", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert (
        "  skills: 2 available (pdf-processing, skill-creator), 1 unavailable, 1 invalid, 1 shadowed"
        in out
    )


def test_doctor_warns_about_each_unusable_skill(config: Path) -> None:
    lines = [check.line() for check in skill_checks(load_config(config, lenient=True))]
    assert lines[0] == (
        "OK    skills: 2 available (pdf-processing, skill-creator), 1 unavailable, 1 invalid, "
        "1 shadowed"
    )
    assert any(
        line.startswith("WARN  skill tmux-control: ")
        and "missing bin perch-test-tmux -> install what it misses" in line
        for line in lines
    )
    assert any(
        line.startswith("WARN  skill broken: ") and "no front matter" in line for line in lines
    )
    assert any("missing-folder: no such folder (skills.paths)" in line for line in lines)


def test_every_bundled_file_is_package_data() -> None:
    """A non-editable install carries exactly what `[tool.setuptools.package-data]` names."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["agents.skills"]
    package = ROOT / "agents" / "skills"
    files = [p.relative_to(package).as_posix() for p in BUNDLED_DIR.rglob("*") if p.is_file()]
    assert "bundled/skill-creator/SKILL.md" in files
    for name in files:
        depth_ok = [p for p in patterns if p.count("/") == name.count("/")]
        assert any(fnmatch.fnmatch(name, p) for p in depth_ok), f"{name} is not package data"
