"""`perch doctor` against the fake model and platform servers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.config.errors import EXIT_CONFIG
from bot.kernel.workspace import seed_workspace
from bot.operator.cli import main
from bot.operator.doctor import run_checks
from bot.operator.doctor_prompt import prompt_check
from tests.chat_replay import ChatReplay
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.prompt_cache import PromptCache, prompt_blocks
from tests.fakes.signal import FakeSignal
from tests.fakes.slack import FakeSlack
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config


async def test_all_checks_pass_against_healthy_services(tmp_path: Path) -> None:
    slack = FakeSlack()
    await slack.start()
    try:
        async with FakeAnthropic() as fake, FakeSignal("+15550001") as signal, FakeTelegram() as tg:
            config = make_config(
                tmp_path,
                fake.base_url,
                {
                    "channels.signal": {
                        "enabled": True,
                        "number": "+15550001",
                        "service_url": signal.url,
                    },
                    "channels.telegram": {"enabled": True, "token": TOKEN, "base_url": tg.base_url},
                    "channels.slack": {
                        "enabled": True,
                        "bot_token": "xoxb-t",
                        "app_token": "xapp-t",
                        "base_url": slack.base_url,
                    },
                },
            )
            seed_workspace(config.workspace)
            checks = await run_checks(config)
    finally:
        await slack.stop()
    assert [c.line() for c in checks if not c.ok] == []
    names = [c.name for c in checks]
    assert names == [
        "config",
        "model",
        "telegram",
        "slack",
        "signal",
        "database",
        "workspace",
        "layout",
        "prompt",
        "timezone",
        "exec",
        "browser",
        "skills",
        "web_search",
        "voice",
    ]
    by_name = {c.name: c for c in checks}
    assert by_name["telegram"].detail == "bot @fakebot is reachable"


async def test_rejected_platform_tokens_say_which_secret_to_fix(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake, FakeTelegram() as tg:
        config = make_config(
            tmp_path,
            fake.base_url,
            {
                "channels.telegram": {
                    "enabled": True,
                    "token": "999:wrong-token-for-this-bot",
                    "base_url": tg.base_url,
                }
            },
        )
        checks = {c.name: c for c in await run_checks(config)}
    assert not checks["telegram"].ok
    assert "TELEGRAM_BOT_TOKEN" in checks["telegram"].fix


async def test_failures_say_what_to_do(tmp_path: Path) -> None:
    async with FakeAnthropic(api_key="the-right-key") as fake, FakeSignal("+1555") as signal:
        signal.set_mode("normal")
        config = make_config(
            tmp_path,
            fake.base_url,
            {
                "channels.signal.enabled": True,
                "channels.signal.number": "+1555",
                "channels.signal.service_url": signal.url,
            },
        )
        checks = {c.name: c for c in await run_checks(config)}
    assert not checks["model"].ok and "ANTHROPIC_API_KEY" in checks["model"].fix
    assert not checks["signal"].ok and "MODE=json-rpc" in checks["signal"].fix
    assert not checks["workspace"].ok and checks["workspace"].fix == "run: perch init"
    assert checks["database"].ok
    assert checks["model"].line().startswith("FAIL  model: the API key was rejected -> ")


async def test_unreachable_model_endpoint_is_reported(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        url = fake.base_url
    config = make_config(tmp_path, url)  # the server is gone now
    checks = {c.name: c for c in await run_checks(config)}
    assert not checks["model"].ok and "unreachable" in checks["model"].detail


def test_doctor_command_exits_78_on_a_broken_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("agent: {queue: {mode: shout}}\n")
    assert main(["doctor", "--config", str(bad)]) == EXIT_CONFIG
    assert capsys.readouterr().out.startswith("FAIL  config:")


def _tokens_said(detail: str, part: str) -> int:
    match = re.search(rf"{part} ~?([\d,]+)", detail)
    assert match is not None, detail
    return int(match.group(1).replace(",", ""))


async def test_doctor_prints_the_fixed_prefix_every_request_starts_with(tmp_path: Path) -> None:
    fake = FakeAnthropic(cache=PromptCache())
    async with fake, ChatReplay(fake, tmp_path) as chat:  # a default install, one message
        await chat.say("hello")
        assert chat.config is not None
        check = await prompt_check(chat.config)
    assert check.ok and not check.warn
    total = _tokens_said(check.detail, "starts with")
    assert 1_000 < total <= 4_000  # the default tools and persona stay lean
    sent = fake.requests[0]  # the estimate is of what the daemon really sends
    blocks = prompt_blocks(sent)
    tools = sum(b.tokens for b in blocks[: len(sent["tools"])])
    assert abs(_tokens_said(check.detail, "tools") - tools) <= len(sent["tools"])
    persona = -(-len(sent["system"][0]["text"]) // 4)
    assert _tokens_said(check.detail, "persona") == persona


async def test_a_bloated_persona_is_a_warning_with_what_to_trim(tmp_path: Path) -> None:
    config = make_config(tmp_path, "http://127.0.0.1:9")
    seed_workspace(config.workspace)
    (config.workspace / "AGENTS.md").write_text("Be thorough. " * 3_000)
    check = await prompt_check(config)
    assert check.ok and check.warn and "trim the persona files" in check.line()
