"""`perch run` as a real process on the console channel, against the fake model server.

These are the issue's "done when" checks: a console conversation with a tool call that is
kept across a restart, a clean exit on SIGTERM, and a SIGKILL mid-run that loses nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.pty_perch import PtyPerch

pytestmark = pytest.mark.timeout(90)


def write_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {
                    "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": base_url}
                },
                "heartbeat": {"every": 0},
                "gateway": {"shutdown_grace": "3s"},
            }
        )
    )
    return path


class Perch(PtyPerch):
    """A `perch run` subprocess on a terminal (the console needs one), with the test's key."""

    @classmethod
    async def start(cls, config: Path, env: dict[str, str] | None = None) -> Perch:  # type: ignore[override]
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}
        started = await PtyPerch.start(config, env)
        started.__class__ = cls
        return started  # type: ignore[return-value]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


async def test_console_conversation_with_a_tool_call_survives_a_restart(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = write_config(tmp_path, fake.base_url)
    fake.queue(
        Reply.tool_use([("write_file", {"path": "todo.md", "content": "- call Alex"})]),
        Reply.text("Saved your todo."),
    )
    perch = await Perch.start(config)
    await perch.say("note: call Alex")
    await perch.expect("perch> Saved your todo.")
    code, err = await perch.finish()  # EOF on the only channel stops the daemon
    assert code == 0, err
    assert (tmp_path / "workspace" / "todo.md").read_text() == "- call Alex"
    assert (tmp_path / "workspace" / "SOUL.md").exists()  # seeded from bootstrap/
    assert "sk-ant-test-1234567890" not in err

    perch = await Perch.start(config)
    await perch.say("what did I ask?")
    await perch.expect("echo: what did I ask?")
    code, err = await perch.finish()
    assert code == 0, err
    history = fake.requests[-1]["messages"]
    assert history[0]["content"][-1]["text"] == "note: call Alex"  # after the time
    assert any(b.get("type") == "tool_result" for m in history for b in m["content"])


async def test_sigterm_mid_run_stops_cleanly_and_keeps_history_valid(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = write_config(tmp_path, fake.base_url)
    fake.queue(Reply.hang())
    perch = await Perch.start(config)
    await perch.say("think hard")
    await fake.wait_requests(1, timeout=20)
    perch.proc.send_signal(signal.SIGTERM)
    await perch.expect("restarting", timeout=20)
    code, err = await perch.finish()
    assert code == 0, err
    db = sqlite3.connect(tmp_path / "data" / "perch.db")
    roles = [r[0] for r in db.execute("SELECT role FROM messages ORDER BY id")]
    assert roles == ["user"]


async def test_sigkill_mid_run_loses_nothing_and_answers_once(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = write_config(tmp_path, fake.base_url)
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    perch = await Perch.start(config)
    await perch.say("remember the milk")
    await fake.wait_requests(1, timeout=20)
    perch.proc.kill()
    await perch.proc.wait()

    gate.set()
    perch = await Perch.start(config)
    await perch.expect("echo: remember the milk")
    code, err = await perch.finish()
    assert code == 0, err
    assert [last_user_text(r) for r in fake.requests] == ["remember the milk"] * 2
    db = sqlite3.connect(tmp_path / "data" / "perch.db")
    rows = [r[0] for r in db.execute("SELECT role FROM messages ORDER BY id")]
    assert rows == ["user", "assistant"]
    pending = db.execute("SELECT count(*) FROM inbox WHERE status = 'pending'").fetchone()[0]
    assert pending == 0
    assert sum("echo: remember the milk" in row for row in perch.screen()) == 1


async def test_a_second_daemon_on_the_same_database_refuses_to_start(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = write_config(tmp_path, fake.base_url)
    first = await Perch.start(config)
    await first.say("hello")
    await first.expect("echo: hello")
    second = await Perch.start(config)
    code, err = await second.finish()
    assert code == 1
    assert "another Perch is already running" in err
    code, err = await first.finish()
    assert code == 0, err
