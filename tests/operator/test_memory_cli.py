"""`perch memory search|rebuild`: the operator's view of the search index, with the daemon
running (over the control socket, `bot.operator.cli.main` in a thread as the shell runs it)
and without one (the CLI opens the store itself), never needing the model key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.operator.cli import main
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.harness import running_daemon


async def perch(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


def write_memory(workspace: Path) -> None:
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    (workspace / "memory" / "2026-05-01.md").write_text(
        "# 2026-05-01\n\n- 14:05 The dentist appointment moved to Thursday.\n"
    )


async def test_search_through_the_daemon_sees_what_it_indexed_and_rebuild_redoes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}) as daemon:
        config = str(daemon.config.source)
        write_memory(daemon.config.workspace)
        fake.queue(Reply.text("The violin lesson is on Monday, noted."))
        assert await perch("chat", "-m", "My violin lesson is on Monday", "--config", config) == 0
        capsys.readouterr()
        assert await perch("memory", "search", "violin", "lesson", "--config", config) == 0
        out = capsys.readouterr().out
        assert "sessions  DM owner on cli (user)" in out and "My violin lesson is on Monday" in out
        assert "(assistant)" in out  # the answer, as it was sent
        assert await perch("memory", "search", "dentist", "--json", "--config", config) == 0
        (hit,) = json.loads(capsys.readouterr().out)
        assert hit["source"] == "memory" and hit["where"] == "memory/2026-05-01.md"
        assert hit["text"] == "The dentist appointment moved to Thursday." and hit["score"] == 1.0
        assert await perch("memory", "rebuild", "--config", config) == 0
        rebuilt = capsys.readouterr().out
        assert rebuilt.startswith("Rebuilt the search index: 1 memory notes, 2 messages, ")
        assert await perch("memory", "search", "violin", "--config", config) == 0
        assert "My violin lesson is on Monday" in capsys.readouterr().out


def test_search_without_a_daemon_or_a_model_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        "providers: {anthropic: {api_key: '${ANTHROPIC_API_KEY}'}}\n"
        "channels: {console: {enabled: false}}\n"
    )
    write_memory(tmp_path / "workspace")
    c = str(config)
    assert main(["memory", "search", "dentist", "--config", c]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1.00  memory    memory/2026-05-01.md, 2026-05-01 14:05\n")
    assert main(["memory", "search", "pasta", "recipe", "--config", c]) == 1
    assert "Nothing in the index matches 'pasta recipe'" in capsys.readouterr().out
    assert main(["memory", "search", "skill", "--source", "skills", "--config", c]) == 0
    assert "skill skill-creator" in capsys.readouterr().out
    assert main(["memory", "search", "x", "--limit", "0", "--config", c]) == 2
    assert "--limit must be 1 to 100" in capsys.readouterr().err
