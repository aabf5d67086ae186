"""Several agents end to end: python-telegram-bot against the fake Bot API, the whole
daemon, the fake model. Two chats bound to two agents are answered each with its own
persona (SOUL.md of its own workspace) and model; one agent's memory is never found by the
other, by recall or by `memory_search`."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.daemon import Daemon
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config

pytestmark = pytest.mark.timeout(180)

GROUP = "-1001234567890"
PERSONA = re.compile(r"I am (\w+), the persona")


@pytest.fixture
async def model() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def persona_of(body: dict[str, Any]) -> str:
    system = json.dumps(body.get("system", ""))
    found = PERSONA.search(system)
    return found.group(1) if found else "nobody"


def signed(body: dict[str, Any]) -> Reply:
    """Answers with the persona the system prompt carries and the model asked for."""
    return Reply.text(f"{persona_of(body)} on {body['model']}")


def seed(workspace: Path, name: str, memory: str) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "SOUL.md").write_text(f"# Soul\n\nI am {name}, the persona of this agent.\n")
    (workspace / "MEMORY.md").write_text(f"# Memory\n\n- {memory}\n")


def config_for(tmp_path: Path, model: FakeAnthropic, tg: FakeTelegram, bindings: Any) -> Any:
    seed(tmp_path / "workspace", "Wren", "The zebra code is 7431.")
    seed(tmp_path / "workspace-work", "Otto", "The giraffe code is 2286.")
    return make_config(
        tmp_path,
        model.base_url,
        {
            "agent.model": "claude-sonnet-5-5",
            "agents": [{"id": "work", "model": "claude-haiku-4-5"}],
            "bindings": bindings,
            "channels.telegram": {
                "enabled": True,
                "token": TOKEN,
                "base_url": tg.base_url,
                "allow_from": ["42"],
                "groups": [GROUP],
                "require_mention": False,
            },
        },
    )


async def test_two_chats_bound_to_two_agents_answer_with_their_own_persona_and_model(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    model.default = signed
    async with FakeTelegram() as tg:
        bindings = [{"agent": "work", "channel": "telegram", "chat": GROUP}]
        daemon = Daemon(config_for(tmp_path, model, tg, bindings))
        await daemon.start()
        try:
            tg.dm("hello", user_id=42)
            await tg.wait_for("sendMessage", 1, timeout=40)
            tg.group_message("hello team", chat_id=int(GROUP), user_id=42)
            await tg.wait_for("sendMessage", 2, timeout=40)
            tg.dm("/status", user_id=42)
            await tg.wait_for("sendMessage", 3, timeout=40)
            tg.group_message("/status", chat_id=int(GROUP), user_id=42)
            await tg.wait_for("sendMessage", 4, timeout=40)
            tg.group_message("/model", chat_id=int(GROUP), user_id=42)
            await tg.wait_for("sendMessage", 5, timeout=40)
        finally:
            await daemon.stop()
    texts = tg.texts()
    assert texts[0] == "Wren on claude-sonnet-5-5"  # the DM: unbound, so main
    assert texts[1] == "Otto on claude-haiku-4-5"  # the bound group: work
    assert "Agent: main" in texts[2]
    assert "Agent: work" in texts[3] and "Model: claude-haiku-4-5" in texts[3]
    assert "claude-haiku-4-5 (default)" in texts[4]  # /model: work's own default


async def test_an_agent_never_sees_another_agents_memory(
    tmp_path: Path, model: FakeAnthropic
) -> None:
    def answer(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and last[0].get("type") == "tool_result":
            return Reply.text("searched")
        return Reply.tool_use([("memory_search", {"query": "zebra giraffe code"})])

    model.default = answer
    async with FakeTelegram() as tg:
        # The owner's DM (the memory files' only audience) is bound to `work`.
        bindings = [{"agent": "work", "channel": "telegram", "peer": "42"}]
        daemon = Daemon(config_for(tmp_path, model, tg, bindings))
        await daemon.start()
        try:
            tg.dm("what are the zebra and giraffe codes?", user_id=42)
            await tg.wait_for("sendMessage", 1, timeout=40)
        finally:
            await daemon.stop()
    sent = "\n".join(json.dumps(body) for body in model.requests)
    assert all(persona_of(body) == "Otto" for body in model.requests)
    assert "2286" in sent  # its own note: recalled and found by memory_search
    assert "7431" not in sent  # main's: never
    assert tg.texts()[-1] == "searched"


async def test_each_agent_has_its_own_heartbeat(tmp_path: Path, model: FakeAnthropic) -> None:
    model.default = signed
    async with FakeTelegram() as tg:
        daemon = Daemon(config_for(tmp_path, model, tg, []))
        await daemon.start()
        try:
            (tmp_path / "workspace-work" / "HEARTBEAT.md").write_text("- Check the build\n")
            assert daemon.scheduler is not None
            outcomes = [await beat.tick() for beat in daemon.scheduler.heartbeats]
            await tg.wait_for("sendMessage", 1, timeout=40)
        finally:
            await daemon.stop()
    assert outcomes[1] == "delivered" and outcomes[0] != "delivered"  # main's file: comments
    assert tg.texts() == ["Otto on claude-haiku-4-5"]  # work's, to the owner
    assert "Check the build" in json.dumps(model.requests[-1]["messages"])
