"""`perch onboard` and `perch doctor` know email through its plug-in: the nested `imap:` and
`smtp:` secrets are found in the template, the live check logs in to a real Dovecot and SMTP
server, and no password lands in the config."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from bot.operator.cli import main
from tests.fakes.anthropic import FakeAnthropic
from tests.mail_servers import Dovecot, SmtpSink

pytestmark = pytest.mark.timeout(120)
KEY = "sk-ant-onboard-email-1"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


async def test_onboard_sets_up_email_and_checks_both_servers_live(
    tmp_path: Path,
    fake: FakeAnthropic,
    dovecot: Dovecot,
    smtp_sink: SmtpSink,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bot, password = dovecot.new_mailbox("bot")
    config, env_file = tmp_path / "config.yaml", tmp_path / "perch.env"
    args = [
        "onboard", "--config", str(config), "--yes", "--api-key", KEY,
        "--base-url", fake.base_url, "--channels", "email",
        "--env", f"EMAIL_ADDRESS={bot}", "--env", f"EMAIL_PASSWORD={password}",
        "--env", "EMAIL_IMAP_HOST=127.0.0.1", "--env", "EMAIL_SMTP_HOST=127.0.0.1",
        "--set", f"channels.email.imap.port={dovecot.imap_port}",
        "--set", "channels.email.imap.tls=none",
        "--set", f"channels.email.smtp.port={smtp_sink.port}",
        "--set", "channels.email.smtp.tls=none",
        "--owner", "email:alice@example.test",
        "--secrets", "env", "--secrets-path", str(env_file),
    ]  # fmt: skip
    code = await asyncio.to_thread(main, args)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"OK    email: {bot}" in out and "SMTP 127.0.0.1" in out
    assert "All checks passed." in out
    text = config.read_text()
    assert password not in text
    section = yaml.safe_load(text)["channels"]["email"]
    assert section["enabled"] is True and section["allow_from"] == ["alice@example.test"]
    assert section["imap"]["password"] == "${EMAIL_PASSWORD:-}"
    assert f"EMAIL_PASSWORD={password}" in env_file.read_text()
