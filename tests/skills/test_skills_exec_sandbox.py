"""A skill's scripts through the real `exec` under bubblewrap: skills outside the workspace are
read-only at /skills/<name>, the workspace's at their own place, nothing else comes along.

These run wherever bubblewrap works and skip visibly (with the reason) where it doesn't, as
tests/tools/test_tools_exec_sandbox.py does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from agents.tools.base import Tool, ToolContext
from agents.tools.sandbox import SandboxUnavailable, select_sandbox
from bot.config.load import load_config
from bot.tools.belt import build_tools
from tests.skill_folders import agentskills_skill, nanobot_skill, write_skill

HELLO = '#!/bin/sh\necho "hello $1 from $(pwd)"\n'


def needs_bwrap() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed; apt-get install bubblewrap to run this")
    try:
        select_sandbox("bwrap")
    except SandboxUnavailable as exc:
        pytest.skip(f"bwrap cannot run here: {exc}")


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Tool, ToolContext, Path]:
    needs_bwrap()
    shared = tmp_path / "shared"
    write_skill(
        shared,
        "greeter",
        "---\nname: greeter\ndescription: Greets.\n---\nRun scripts/hello.sh NAME.\n",
        {"scripts/hello.sh": HELLO},
    )
    agentskills_skill(shared)
    nanobot_skill(shared)  # its binary is missing: not offered, not mounted
    (shared / "secret.txt").write_text("not for the sandbox")
    ws = tmp_path / "workspace"
    write_skill(
        ws / "skills",
        "local-tool",
        "---\nname: local-tool\ndescription: Local.\n---\n",
        {"scripts/run.sh": "#!/bin/sh\necho local ran\n"},
    )
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "agent": {
                    "workspace": "./workspace",
                    "exec": {"enabled": True, "sandbox": "bwrap"},
                },
                "skills": {"paths": ["./shared"]},
                "channels": {"console": {"enabled": False}},
            }
        )
    )
    config = load_config(config_file, {})
    tool = build_tools(config).get("exec")
    assert tool is not None
    return tool, ToolContext(workspace=config.workspace, session_key="agent:main:t"), shared


Setup = tuple[Tool, ToolContext, Path]


async def run(setup: Setup, command: str) -> str:
    tool, ctx, _ = setup
    return (await tool.run({"command": command}, ctx)).content


async def test_a_skill_script_outside_the_workspace_runs_read_only_at_its_location(
    setup: Setup,
) -> None:
    out = await run(setup, "cd /skills/greeter && sh scripts/hello.sh Ada")
    assert out == "[exit code 0]\nhello Ada from /skills/greeter\n"
    denied = await run(setup, "echo x > /skills/greeter/new.txt; rm /skills/greeter/SKILL.md")
    assert denied.count("Read-only file system") == 2
    assert (setup[2] / "greeter" / "SKILL.md").exists()


async def test_only_offered_skills_are_visible_and_nothing_beside_them(setup: Setup) -> None:
    assert await run(setup, "ls /skills") == (
        "[exit code 0]\ngreeter\npdf-processing\nskill-creator\n"
    )
    shared = setup[2]
    out = await run(setup, f"cat /skills/greeter/../secret.txt {shared}/secret.txt; echo end")
    assert "not for the sandbox" not in out and out.endswith("end\n")


@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="no /usr/bin/python3 here")
async def test_a_public_collection_skill_runs_its_python_script(setup: Setup) -> None:
    out = await run(setup, "cd /skills/pdf-processing && python3 scripts/extract.py input.pdf")
    assert out == "[exit code 0]\nextracted ['input.pdf']\n"


async def test_a_workspace_skill_runs_where_it_lies(setup: Setup) -> None:
    assert await run(setup, "sh skills/local-tool/scripts/run.sh") == "[exit code 0]\nlocal ran\n"


async def test_a_skill_added_later_is_mounted_on_the_next_call(setup: Setup) -> None:
    write_skill(
        setup[2], "late", "---\nname: late\ndescription: Late.\n---\n", {"go.sh": "echo late\n"}
    )
    assert await run(setup, "sh /skills/late/go.sh") == "[exit code 0]\nlate\n"
