"""The system prompt: workspace files, caps with marked truncation, cached until changed."""

from __future__ import annotations

import os
from pathlib import Path

from agents.prompt import PromptBuilder, RuntimeInfo

RUNTIME = RuntimeInfo(agent_id="main", session_key="agent:main:console:local:dm:o", model="m")


def test_full_prompt_has_persona_files_and_rules_and_a_cached_stable_block(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("Be warm.")
    (tmp_path / "IDENTITY.md").write_text("I am Perch.")
    blocks = PromptBuilder(tmp_path).build("full", RUNTIME)
    stable, session = blocks  # no MEMORY.md and no skills: no slowly changing block
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert '<context_file name="SOUL.md">\nBe warm.\n</context_file>' in stable["text"]
    assert stable["text"].index("IDENTITY.md") < stable["text"].index("SOUL.md")
    assert "NO_REPLY" in stable["text"] and "HEARTBEAT_OK" in stable["text"]
    assert "session: agent:main:console:local:dm:o" in session["text"]
    assert "cache_control" not in session


def test_the_time_travels_with_the_user_message_not_in_the_system_prompt(
    tmp_path: Path,
) -> None:
    now = [1_795_600_000.0]  # Wed 2026-11-25 09:46:40 UTC
    builder = PromptBuilder(tmp_path, clock=lambda: now[0])
    berlin = RuntimeInfo(agent_id="main", session_key="k", model="m", timezone="Europe/Berlin")
    first = builder.build("full", berlin)
    assert builder.turn_context(berlin) == [
        {"type": "text", "text": "[Wed 2026-11-25 10:46 Europe/Berlin]"}
    ]
    now[0] += 61
    assert builder.turn_context(berlin)[0]["text"] == "[Wed 2026-11-25 10:47 Europe/Berlin]"
    assert builder.build("full", berlin) == first  # a new minute changes nothing before it
    assert all("10:4" not in b["text"] for b in first)


def test_memory_lives_in_its_own_cached_block_so_an_edit_leaves_the_persona_alone(
    tmp_path: Path,
) -> None:
    (tmp_path / "SOUL.md").write_text("Be warm.")
    memory = tmp_path / "MEMORY.md"
    memory.write_text("- Ana's birthday is 12 May.")
    builder = PromptBuilder(tmp_path)
    persona, slow, _ = builder.build("full", RUNTIME)
    assert slow["cache_control"] == {"type": "ephemeral"} and "12 May" in slow["text"]
    assert "12 May" not in persona["text"]
    memory.write_text("- Ana's birthday is 12 May.\n- She likes orchids.")
    os.utime(memory, ns=(memory.stat().st_atime_ns, memory.stat().st_mtime_ns + 1_000_000))
    after = builder.build("full", RUNTIME)
    assert after[0]["text"] is persona["text"] and "orchids" in after[1]["text"]
    assert len(PromptBuilder(tmp_path).build("minimal", RUNTIME)) == 1 + 1  # no MEMORY.md


def test_template_comments_for_owners_are_not_sent(tmp_path: Path) -> None:
    (tmp_path / "USER.md").write_text(
        "# About the owner\n<!-- Fill this in. -->\n\n- **Name:** <!-- what to call you -->\n"
        "- **Languages:** English <!-- and German? -->\n\n## Work\n<!-- Your job. -->\n"
    )
    (tmp_path / "MEMORY.md").write_text("# Long-term memory\n\n<!-- Curated facts. -->\n")
    blocks = PromptBuilder(tmp_path).build("full", RUNTIME)
    text = "".join(b["text"] for b in blocks)
    assert "<!--" not in text and "Fill this in" not in text and "## Work" not in text
    assert "- **Languages:** English" in text and "**Name:**" not in text
    assert "MEMORY.md" not in text and len(blocks) == 2  # an empty template is left out


def test_minimal_prompt_has_only_agents_and_tools(tmp_path: Path) -> None:
    for name in ("SOUL.md", "AGENTS.md", "TOOLS.md", "USER.md"):
        (tmp_path / name).write_text(f"content of {name}")
    text = PromptBuilder(tmp_path).build("minimal", RUNTIME)[0]["text"]
    assert "content of AGENTS.md" in text and "content of TOOLS.md" in text
    assert "SOUL" not in text and "USER" not in text


def test_caps_are_applied_and_marked(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 5000)
    (tmp_path / "TOOLS.md").write_text("t" * 5000)
    text = PromptBuilder(tmp_path, per_file_cap=1000, total_cap=1500).build("minimal", RUNTIME)[0][
        "text"
    ]
    assert "[... AGENTS.md truncated: showed 1000 of 5000 characters]" in text
    assert "[... TOOLS.md truncated: showed 500 of 5000 characters]" in text
    assert text.count("a") < 1100


def test_files_are_read_once_and_refreshed_when_they_change(tmp_path: Path) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("first")
    builder = PromptBuilder(tmp_path)
    first = builder.build("full", RUNTIME)[0]["text"]
    assert builder.build("full", RUNTIME)[0]["text"] is first  # cached: the same object
    soul.write_text("second, longer")
    st = soul.stat()
    os.utime(soul, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert "second, longer" in builder.build("full", RUNTIME)[0]["text"]


def test_missing_workspace_gives_a_usable_prompt(tmp_path: Path) -> None:
    blocks = PromptBuilder(tmp_path / "nope").build("full", RUNTIME)
    assert "Perch" in blocks[0]["text"]
