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
    stable, volatile = blocks
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert '<context_file name="SOUL.md">\nBe warm.\n</context_file>' in stable["text"]
    assert stable["text"].index("IDENTITY.md") < stable["text"].index("SOUL.md")
    assert "NO_REPLY" in stable["text"] and "HEARTBEAT_OK" in stable["text"]
    assert "Current time:" in volatile["text"] and "cache_control" not in volatile


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
