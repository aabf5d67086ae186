"""Two providers in one daemon: `/model` per chat (kept across restarts, inherited by
sub-agents), fallback across providers named in `/status`, a session that switches kinds and
keeps its history, and `perch doctor` naming the provider that fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.operator.doctor import run_checks
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.fakes.chat import MemoryChannel
from tests.fakes.openai import FakeOpenAI
from tests.harness import make_config, running_daemon
from tests.turn_text import said

WAIT = 30  # generous: the first turn imports an SDK, and CI machines are busy
OPEN_DMS = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}


@pytest.fixture
async def servers() -> AsyncIterator[tuple[FakeAnthropic, FakeOpenAI]]:
    async with FakeAnthropic() as claude, FakeOpenAI() as local:
        yield claude, local


def settings(claude: FakeAnthropic, local: FakeOpenAI, **agent: Any) -> dict[str, Any]:
    providers = {
        "anthropic": {"api_key": "test-key", "base_url": claude.base_url},
        "local": {
            "kind": "openai",
            "api_key": "none",
            "base_url": local.base_url,
            "models": ["qwen3:8b", "gpt-test"],
        },
    }
    out: dict[str, Any] = {"providers": providers, **OPEN_DMS}
    out.update({f"agent.{k}": v for k, v in agent.items()})
    return out


async def test_model_command_switches_lists_and_survives_a_restart(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    chan = MemoryChannel("telegram")
    overrides = settings(claude, local)
    async with running_daemon(tmp_path, claude, {"telegram": chan}, overrides):
        await chan.say("my name is Ada")
        await chan.wait_sent(1, timeout=WAIT)
        await chan.say("/model local/qwen3:8b")
        await chan.wait_sent(2, timeout=WAIT)
        assert chan.texts()[1].startswith("This chat now uses local/qwen3:8b.")
        await chan.say("/model")
        await chan.wait_sent(3, timeout=WAIT)
    listing = chan.texts()[2].splitlines()
    assert "* local/qwen3:8b" in listing
    assert "  claude-sonnet-5-5 (default)" in listing and "  local/gpt-test" in listing

    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, claude, {"telegram": chan}, overrides):
        await chan.say("what is my name?")
        assert await chan.wait_sent(1, timeout=WAIT) == ["echo: what is my name?"]
        await chan.say("/status")
        await chan.wait_sent(2, timeout=WAIT)
        assert "Model: local/qwen3:8b (chosen with /model)" in chan.texts()[1]
        await chan.say("/model default")
        await chan.wait_sent(3, timeout=WAIT)
        await chan.say("again")
        await chan.wait_sent(4, timeout=WAIT)
    assert chan.texts()[2] == "Back to the configured model: claude-sonnet-5-5."
    # The Claude history went to the Chat Completions server, translated, and back.
    body = local.requests[0]
    assert body["model"] == "qwen3:8b"
    assert [said(m.get("content")) for m in body["messages"][1:]] == [
        "my name is Ada",
        "echo: my name is Ada",
        "what is my name?",
    ]
    assert len(claude.requests) == 2 and claude.requests[-1]["model"] == "claude-sonnet-5-5"


async def test_unknown_provider_is_refused_plainly(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, claude, {"telegram": chan}, settings(claude, local)):
        await chan.say("/model nowhere/x")
        [reply] = await chan.wait_sent(1, timeout=WAIT)
    assert reply.startswith("Unknown provider 'nowhere'")
    assert "anthropic, local" in reply


async def test_fallback_crosses_providers_and_status_names_the_model(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    claude.default = lambda body: Reply.http_error(529, "overloaded_error", retry_after=0)
    local.queue(Reply.tool_use([("memory_append", {"text": "Cat: Miso"})]), Reply.text("noted"))
    chan = MemoryChannel("telegram")
    overrides = settings(claude, local, fallbacks=["local/gpt-test"])
    async with running_daemon(tmp_path, claude, {"telegram": chan}, overrides):
        await chan.say("remember my cat Miso")
        assert await chan.wait_sent(1, timeout=WAIT) == ["noted"]
        await chan.say("/status")
        await chan.wait_sent(2, timeout=WAIT)
    status = chan.texts()[1]
    assert "Model: claude-sonnet-5-5" in status
    assert "Last answer from: local/gpt-test (fallback)" in status
    # Once moved on, the rest of the turn stayed on the fallback: Claude was tried once.
    assert len(claude.requests) == 8  # one call's retry budget
    assert len(local.requests) == 2
    assert local.requests[1]["messages"][-1]["role"] == "tool"


async def test_an_unreachable_only_model_fails_fast_with_a_plain_message(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, _local = servers
    chan = MemoryChannel("telegram")
    overrides = settings(claude, _local)
    overrides["providers"]["local"]["base_url"] = "http://127.0.0.1:9/v1"  # nothing listens
    overrides["providers"]["local"]["unreachable_budget_s"] = 1
    async with running_daemon(tmp_path, claude, {"telegram": chan}, overrides):
        await chan.say("/model local/qwen3:8b")
        await chan.say("hello")
        await chan.wait_sent(2, timeout=60)
    reply = chan.texts()[1]
    assert reply.startswith("Sorry, I couldn't answer that:")
    assert "local/qwen3:8b can't be reached" in reply


async def test_sub_agents_inherit_the_chosen_model(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    local.queue(
        Reply.tool_use([("spawn", {"label": "helper", "task": "say hi", "wait": True})]),
        Reply.text("child says hi"),
        Reply.text("done"),
    )
    chan = MemoryChannel("telegram")
    async with running_daemon(tmp_path, claude, {"telegram": chan}, settings(claude, local)):
        await chan.say("/model local/gpt-test")
        await chan.say("delegate")
        await chan.wait_sent(2, timeout=WAIT)
    assert chan.texts()[1] == "done"
    assert [r["model"] for r in local.requests] == ["gpt-test"] * 3
    assert claude.requests == []


async def test_a_configured_sub_agent_model_wins_over_the_chat_choice(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    local.queue(
        Reply.tool_use([("spawn", {"label": "helper", "task": "say hi", "wait": True})]),
        Reply.text("done"),
    )
    chan = MemoryChannel("telegram")
    overrides = settings(claude, local)
    overrides["agent.subagents"] = {"model": "claude-haiku-4-5"}
    async with running_daemon(tmp_path, claude, {"telegram": chan}, overrides):
        await chan.say("/model local/gpt-test")
        await chan.say("delegate")
        await chan.wait_sent(2, timeout=WAIT)
    assert [r["model"] for r in claude.requests] == ["claude-haiku-4-5"]
    assert [r["model"] for r in local.requests] == ["gpt-test"] * 2


async def test_doctor_checks_each_provider_and_names_the_failing_one(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    claude, local = servers
    overrides = settings(claude, local, fallbacks=["local/gpt-test"])
    checks = {
        c.name: c for c in await run_checks(make_config(tmp_path, claude.base_url, overrides))
    }
    assert checks["model"].ok and checks["model local"].ok
    assert "gpt-test, qwen3:8b listed" in checks["model local"].detail

    overrides["providers"]["local"]["models"] = ["llama-missing"]
    checks = {
        c.name: c for c in await run_checks(make_config(tmp_path, claude.base_url, overrides))
    }
    assert checks["model"].ok
    assert not checks["model local"].ok
    assert "provider local does not list llama-missing" in checks["model local"].detail

    strict = FakeOpenAI(api_key="right")
    async with strict:
        overrides["providers"]["local"].update(base_url=strict.base_url, api_key="wrong")
        config = make_config(tmp_path, claude.base_url, overrides)
        checks = {c.name: c for c in await run_checks(config)}
    assert (
        checks["model local"]
        .line()
        .startswith("FAIL  model local: provider local: the API key was rejected (401)")
    )


async def test_doctor_checks_the_embeddings_provider_and_model(
    tmp_path: Path, servers: tuple[FakeAnthropic, FakeOpenAI]
) -> None:
    """A provider only recall's embeddings use is checked too, with the embeddings model."""
    claude, local = servers
    overrides = settings(claude, local)
    overrides["providers"]["vectors"] = {"kind": "openai", "base_url": local.base_url}
    overrides["agent.recall.embeddings"] = {"provider": "vectors", "model": "gpt-test"}
    checks = {
        c.name: c for c in await run_checks(make_config(tmp_path, claude.base_url, overrides))
    }
    assert checks["model vectors"].ok
    assert "provider vectors: gpt-test listed" in checks["model vectors"].detail

    overrides["agent.recall.embeddings"]["model"] = "embed-missing"
    checks = {
        c.name: c for c in await run_checks(make_config(tmp_path, claude.base_url, overrides))
    }
    assert not checks["model vectors"].ok
    assert "provider vectors does not list embed-missing" in checks["model vectors"].detail
