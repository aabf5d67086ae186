"""A secret file beside a skill's SKILL.md in a `skills.paths` folder (a `${file:}` the config
reads) is inside the boundary: `read_skill` refuses it and `exec` sees an empty file where it
would show (`/skills/<name>/api.key`), while the skill itself stays usable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from agents.tools.base import ToolContext, ToolError
from agents.tools.sandbox import SandboxUnavailable, select_sandbox
from bot.config.load import load_config
from bot.tools.belt import build_tools
from tests.skill_folders import write_skill

SECRET = "jira-secret-Zq81mW3v9"


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    folder = write_skill(
        tmp_path / "team",
        "jira",
        "---\nname: jira\ndescription: Files Jira tickets.\n---\nRun scripts/file.sh.\n",
        {"scripts/file.sh": "#!/bin/sh\necho filed\n", "api.key": SECRET},
    )
    (folder / "api.key").chmod(0o600)
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "agent": {
                    "workspace": "./workspace",
                    "exec": {"enabled": shutil.which("bwrap") is not None, "sandbox": "bwrap"},
                    "web_search": {"provider": "brave", "api_key": f"${{file:{folder}/api.key}}"},
                },
                "skills": {"paths": ["./team"]},
                "channels": {"console": {"enabled": False}},
            }
        )
    )
    return path


async def test_read_skill_refuses_a_secret_beside_the_skill(config_file: Path) -> None:
    config = load_config(config_file, {})
    assert config.agent.web_search.api_key == SECRET
    tool = build_tools(config).get("read_skill")
    assert tool is not None
    ctx = ToolContext(workspace=config.workspace, session_key="agent:main:t")
    with pytest.raises(ToolError, match="no tool may read it"):
        await tool.run({"name": "jira", "path": "api.key"}, ctx)
    with pytest.raises(ToolError, match="no tool may read it"):
        await tool.run({"name": "jira", "path": "./api.key"}, ctx)
    script = await tool.run({"name": "jira", "path": "scripts/file.sh"}, ctx)
    assert "echo filed" in script.content


async def test_exec_sees_no_secret_beside_the_skill(config_file: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap")
    try:
        select_sandbox("bwrap")
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")
    config = load_config(config_file, {})
    tool = build_tools(config).get("exec")
    assert tool is not None
    ctx = ToolContext(workspace=config.workspace, session_key="agent:main:t")
    config.workspace.mkdir(parents=True, exist_ok=True)
    command = "cat /skills/jira/api.key; echo; sh /skills/jira/scripts/file.sh"
    done = (await tool.run({"command": command}, ctx)).content
    assert SECRET not in done
    assert "filed" in done
