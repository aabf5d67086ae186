"""The skills block of the system prompt: sorted, deterministic, escaped, `always` bodies in."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.prompt import PromptBuilder, RuntimeInfo
from agents.skills.catalog import SkillCatalog
from agents.skills.listing import skills_prompt
from agents.skills.skill import BUNDLED_DIR, SkillSource
from tests.skill_folders import age, agentskills_skill, nanobot_skill, write_skill

RUNTIME = RuntimeInfo(agent_id="main", session_key="agent:main:console:local:dm:o", model="m")


def catalog(ws: Path, bundled: bool = True) -> SkillCatalog:
    sources = [SkillSource("workspace", ws, ("skills",))]
    if bundled:
        sources.append(SkillSource("bundled", BUNDLED_DIR))
    return SkillCatalog(sources, workspace=ws)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "skills").mkdir()
    return tmp_path


def test_available_skills_are_listed_sorted_in_their_own_cached_block(ws: Path) -> None:
    write_skill(
        ws / "skills", "zeta", '---\nname: zeta\ndescription: Last <b>&</b> "quoted"\n---\n'
    )
    agentskills_skill(ws / "skills")
    nanobot_skill(ws / "skills")  # unavailable: never offered
    write_skill(ws / "skills", "broken", "nothing\n")
    (ws / "SOUL.md").write_text("Be warm.")
    persona, slow, session = PromptBuilder(ws, skills=catalog(ws)).build("full", RUNTIME)
    text = slow["text"]
    assert slow["cache_control"] == {"type": "ephemeral"} and "skill" not in session["text"]
    assert "## Skills" not in persona["text"] and "Be warm." in persona["text"]
    block = text[text.index("## Skills") :]
    assert block.index("<name>pdf-processing</name>") < block.index("<name>skill-creator</name>")
    assert block.index("<name>skill-creator</name>") < block.index("<name>zeta</name>")
    assert "<description>Last &lt;b&gt;&amp;&lt;/b&gt; &quot;quoted&quot;</description>" in block
    assert f"<location>{(ws / 'skills' / 'pdf-processing').resolve()}</location>" in block
    assert "<location>/skills/skill-creator</location>" in block
    assert "tmux-control" not in text and "broken" not in text


def test_the_block_is_the_same_text_for_the_same_skills(tmp_path: Path) -> None:
    def build(order: list[str], root: Path) -> str:
        root.mkdir()
        for name in order:
            write_skill(
                root / "skills", name, f"---\nname: {name}\ndescription: does {name}\n---\n"
            )
        return skills_prompt(catalog(root, bundled=False).skills())

    base = tmp_path
    one = build(["b-skill", "a-skill", "c-skill"], base / "one")
    two = build(["c-skill", "a-skill", "b-skill"], base / "two")
    assert one.replace(str(base / "one"), "W") == two.replace(str(base / "two"), "W")
    assert one.index("a-skill") < one.index("b-skill") < one.index("c-skill")


def test_an_always_skill_brings_its_body_and_no_skill_no_block(ws: Path) -> None:
    blocks = PromptBuilder(ws, skills=catalog(ws, bundled=False)).build("full", RUNTIME)
    assert len(blocks) == 2 and all("## Skills" not in b["text"] for b in blocks)
    write_skill(
        ws / "skills",
        "house-rules",
        "---\nname: house-rules\ndescription: Rules.\nalways: true\n---\nAlways answer in haiku.\n",
    )
    text = PromptBuilder(ws, skills=catalog(ws)).build("minimal", RUNTIME)[1]["text"]
    assert (
        f'<skill_instructions name="house-rules" location="{(ws / "skills" / "house-rules").resolve()}">\n'
        "Always answer in haiku.\n</skill_instructions>"
    ) in text
    assert "Writing a skill" not in text  # a skill that is not always stays behind read_skill


def test_the_prompt_is_reused_until_a_skill_changes(ws: Path) -> None:
    folder = agentskills_skill(ws / "skills")
    for path in (folder / "SKILL.md", folder, ws / "skills"):
        age(path)
    builder = PromptBuilder(ws, skills=catalog(ws))
    persona, first = (b["text"] for b in builder.build("full", RUNTIME)[:2])
    again = builder.build("full", RUNTIME)
    assert again[0]["text"] is persona and again[1]["text"] is first
    write_skill(ws / "skills", "new-one", "---\nname: new-one\ndescription: brand new\n---\n")
    after = builder.build("full", RUNTIME)
    second = after[1]["text"]
    assert "<name>new-one</name>" in second and "<name>new-one</name>" not in first
    assert after[0]["text"] is persona  # the persona block, and so its cache, is untouched
