"""`read_skill` against a hostile model: instructions and files beside them, nothing outside."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.skills.catalog import SkillCatalog
from agents.skills.skill import BUNDLED_DIR, SkillSource
from agents.tools.base import ToolContext, ToolError
from agents.tools.read_skill import ReadSkillTool
from tests.skill_folders import agentskills_skill, nanobot_skill, openclaw_skill, write_skill

SECRET = "TOP-SECRET-CONTENT-4711"
Setup = tuple[ReadSkillTool, ToolContext, Path]


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Setup:
    monkeypatch.setenv("GH_TOKEN", "set")
    ws = tmp_path / "ws"
    shared = tmp_path / "shared"
    (ws / "skills").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text(SECRET)
    agentskills_skill(shared)
    openclaw_skill(ws / "skills", bins='"sh"')
    nanobot_skill(ws / "skills")  # its binary is missing
    write_skill(ws / "skills", "broken", "no front matter here\n")
    pdf = shared / "pdf-processing"
    (pdf / "escape").symlink_to(tmp_path)
    (pdf / "secret-link.txt").symlink_to(tmp_path / "secret.txt")
    (pdf / "assets").mkdir()
    (pdf / "assets" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (pdf / "references" / "BIG.md").write_text("b" * 300_000)
    catalog = SkillCatalog(
        [
            SkillSource("workspace", ws, ("skills",)),
            SkillSource("path", shared),
            SkillSource("bundled", BUNDLED_DIR),
        ],
        workspace=ws,
    )
    return ReadSkillTool(catalog), ToolContext(workspace=ws, session_key="agent:main:t"), pdf


async def test_the_name_alone_gives_instructions_location_and_files(setup: Setup) -> None:
    tool, ctx, _ = setup
    result = await tool.run({"name": "pdf-processing"}, ctx)
    text = result.content
    assert text.startswith("# Skill pdf-processing\nFolder for exec: /skills/pdf-processing\n")
    assert "Run `python3 scripts/extract.py input.pdf`" in text
    assert "description:" not in text  # the front matter stays out
    assert "references/FORMS.md" in text and "scripts/extract.py" in text
    assert "SKILL.md" not in text.split("Files in this skill", 1)[1]


async def test_openclaw_base_dir_becomes_the_folder_exec_sees(setup: Setup) -> None:
    tool, ctx, _ = setup
    real = os.path.realpath(ctx.workspace / "skills" / "gh-issues")  # noqa: ASYNC240
    text = (await tool.run({"name": "gh-issues"}, ctx)).content
    assert f"Run `{real}/scripts/triage.sh <owner/repo>`" in text


async def test_a_file_and_a_folder_beside_the_instructions(setup: Setup) -> None:
    tool, ctx, _ = setup
    forms = await tool.run({"name": "pdf-processing", "path": "references/FORMS.md"}, ctx)
    assert forms.content == "# Forms\nFill the fields in page order.\n"
    listing = await tool.run({"name": "pdf-processing", "path": "./scripts"}, ctx)
    assert listing.content == "extract.py"
    same = await tool.run({"name": "pdf-processing", "path": "SKILL.md"}, ctx)
    assert same.content.startswith("# Skill pdf-processing")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("../secret.txt", "contains '..'"),
        ("references/../../secret.txt", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("secret-link.txt", "symbolic link"),
        ("escape/secret.txt", "symbolic link"),
        ("nothing-here.md", "no such file or folder"),
        ("refs\x00.md", "NUL byte"),
        ("references/BIG.md", "300,000 bytes, over read_skill's 200,000"),
    ],
)
async def test_paths_that_leave_or_strain_the_folder_are_refused(
    setup: Setup,
    path: str,
    problem: str,
) -> None:
    tool, ctx, _ = setup
    with pytest.raises(ToolError) as caught:
        await tool.run({"name": "pdf-processing", "path": path}, ctx)
    assert problem in str(caught.value) and SECRET not in str(caught.value)


async def test_a_binary_file_is_named_not_dumped(setup: Setup) -> None:
    tool, ctx, _ = setup
    result = await tool.run({"name": "pdf-processing", "path": "assets/logo.png"}, ctx)
    assert result.content == (
        "assets/logo.png is a binary file (16 bytes); use it with exec at "
        "/skills/pdf-processing/assets/logo.png"
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("tmux-control", "cannot be used on this machine: missing bin perch-test-tmux"),
        ("broken", "is invalid: no front matter"),
        (
            "nope",
            "no skill named 'nope'; the skills you can use: gh-issues, pdf-processing, skill-creator",
        ),
        ("", "missing argument 'name'"),
    ],
)
async def test_only_offered_skills_can_be_read(
    setup: Setup,
    name: str,
    problem: str,
) -> None:
    tool, ctx, _ = setup
    with pytest.raises(ToolError) as caught:
        await tool.run({"name": name}, ctx)
    assert problem in str(caught.value)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.sampled_from(
            [
                "..",
                ".",
                "",
                "escape",
                "secret.txt",
                "secret-link.txt",
                "references",
                "/",
                "ws",
                "shared",
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
async def test_no_path_reaches_a_file_outside_the_skill(
    setup: Setup,
    parts: list[str],
) -> None:
    tool, ctx, _ = setup
    try:
        result = await tool.run({"name": "pdf-processing", "path": "/".join(parts)}, ctx)
    except ToolError as exc:
        assert SECRET not in str(exc)
    else:
        assert SECRET not in result.content
