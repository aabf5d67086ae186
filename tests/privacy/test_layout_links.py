"""The layout check covers what the workspace check missed: a config hard-linked into the
workspace (or into a `skills.paths` folder) stops the start like the config itself would;
a secret file other users can read, or one inside a skill folder, is a doctor warning."""

from __future__ import annotations

import os
from pathlib import Path

from tests.config.test_layout_and_secrets import perch, write


def test_a_config_hard_linked_into_the_workspace_stops_the_start(tmp_path: Path) -> None:
    config = write(tmp_path / "config.yaml", {"agent": {"workspace": "./ws"}})
    (tmp_path / "ws").mkdir()
    os.link(config, tmp_path / "ws" / "notes.txt")
    code, out = perch(config, "run")
    assert code == 78, out
    assert "ws/notes.txt is a hard link to the config file" in out, out
    code, out = perch(config, "doctor")
    assert "FAIL  layout:" in out and "hard link to the config file" in out, out


def test_a_config_hard_linked_into_a_skill_folder_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / "team" / "jira").mkdir(parents=True)
    config = write(
        tmp_path / "config.yaml", {"agent": {"workspace": "./ws"}, "skills": {"paths": ["./team"]}}
    )
    os.link(config, tmp_path / "team" / "jira" / "reference.md")
    code, out = perch(config, "run")
    assert code == 78 and "reference.md is a hard link to the config file" in out, out


def test_a_secret_file_others_can_read_or_in_a_skill_folder_is_a_warning(tmp_path: Path) -> None:
    skill = tmp_path / "team" / "jira"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: jira\ndescription: Jira.\n---\n")
    key = skill / "api.key"
    key.write_text("jira-secret-Zq81mW3v9")
    key.chmod(0o644)
    data = {
        "agent": {
            "workspace": "./ws",
            "web_search": {"provider": "brave", "api_key": f"${{file:{key}}}"},
        },
        "skills": {"paths": ["./team"]},
    }
    config = write(tmp_path / "config.yaml", data)
    _, out = perch(config, "doctor")
    line = next(line for line in out.splitlines() if "layout:" in line)
    assert line.startswith("WARN  layout:"), out
    assert "can be read by other users (mode 0644)" in line and "skills.paths folder" in line
    assert "jira-secret" not in out
