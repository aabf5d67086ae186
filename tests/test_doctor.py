"""`perch doctor` against the fake model and platform servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.errors import EXIT_CONFIG
from bot.operator.cli import main
from bot.operator.doctor import run_checks
from bot.workspace import seed_workspace
from tests.fakes.anthropic import FakeAnthropic
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
        "timezone",
        "exec",
        "skills",
        "web_search",
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
