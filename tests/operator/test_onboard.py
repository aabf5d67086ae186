"""`perch onboard` driven by flags and through stdin, checked live against the fakes."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.config.load import load_config
from bot.operator.cli import main
from bot.operator.onboard_files import read_env_file, write_env_file
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.telegram import TOKEN, FakeTelegram

pytestmark = pytest.mark.timeout(120)
KEY = "sk-ant-onboard-123456"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


async def perch(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


async def run_onboard(tmp_path: Path, stdin: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "TELEGRAM"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.operator.cli",
        "onboard",
        "--config",
        str(tmp_path / "config.yaml"),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_flags_alone_set_up_a_checked_config_and_a_private_env_file(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    config, env_file = tmp_path / "config.yaml", tmp_path / "secrets" / "perch.env"
    async with FakeTelegram() as telegram:
        code = await perch(
            "onboard",
            "--config",
            str(config),
            "--yes",
            "--api-key",
            KEY,
            "--base-url",
            fake.base_url,
            "--channels",
            "telegram",
            "--env",
            f"TELEGRAM_BOT_TOKEN={TOKEN}",
            "--set",
            f"channels.telegram.base_url={telegram.base_url}",
            "--owner",
            "telegram:4242",
            "--secrets",
            "env",
            "--secrets-path",
            str(env_file),
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK    model:" in out and "OK    telegram: bot @fakebot" in out
    assert "All checks passed." in out  # doctor ran, after the workspace was seeded
    text = config.read_text()
    assert "# from @BotFather" in text  # the shipped comments are kept
    data = yaml.safe_load(text)
    assert data["channels"]["telegram"]["enabled"] is True
    assert data["channels"]["telegram"]["allow_from"] == ["4242"]
    assert data["channels"]["telegram"]["token"] == "${TELEGRAM_BOT_TOKEN:-}"  # no secret in it
    assert KEY not in text and TOKEN not in text
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert f"ANTHROPIC_API_KEY={KEY}" in env_file.read_text()
    assert f"TELEGRAM_BOT_TOKEN={TOKEN}" in env_file.read_text()


async def test_a_rejected_key_writes_nothing(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    flags = ["--yes", "--base-url", fake.base_url, "--channels", "none", "--secrets", "env"]
    assert await perch("onboard", "--config", str(config), "--api-key", "sk-ant-wrong", *flags) == 1
    captured = capsys.readouterr()
    assert "FAIL  model: the API key was rejected" in captured.out
    assert "nothing written" in captured.err
    assert not config.exists() and not (tmp_path / "perch.env").exists()


async def test_stdin_answers_then_a_rerun_edits_and_asks_before_overwriting(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    async with FakeTelegram() as telegram:
        base = f"channels.telegram.base_url={telegram.base_url}"
        answers = [
            KEY,  # model key
            fake.base_url,  # model URL
            "telegram",  # platforms
            TOKEN,  # TELEGRAM_BOT_TOKEN (polling: no webhook secret is asked)
            "",  # owner id: pairing instead
            "",  # secrets in an env file (default)
            "",  # ./perch.env (default)
        ]
        code, out, err = await run_onboard(tmp_path, "\n".join(answers) + "\n", "--set", base)
        assert code == 0, out + err
        assert "OK    telegram" in out and "perch pairing approve" in out
        config = tmp_path / "config.yaml"
        first = config.read_text()
        assert yaml.safe_load(first)["channels"]["telegram"]["allow_from"] == []
        env_file = tmp_path / "perch.env"
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600

        # Re-run: Enter keeps every earlier answer (read back from perch.env and the config);
        # the owner id is new; "n" to the overwrite question leaves the file alone.
        rerun = ["", "", "", "", "777", "", "", "n"]
        code, out, err = await run_onboard(tmp_path, "\n".join(rerun) + "\n", "--set", base)
        assert code == 1 and "left as it was" in err
        assert config.read_text() == first

        rerun[-1] = "y"
        code, out, err = await run_onboard(tmp_path, "\n".join(rerun) + "\n", "--set", base)
        assert code == 0, out + err
    assert yaml.safe_load(config.read_text())["channels"]["telegram"]["allow_from"] == ["777"]
    assert (tmp_path / "config.yaml.bak.1").read_text() == first
    assert env_file.read_text().count("TELEGRAM_BOT_TOKEN=") == 1  # edited, not appended


async def test_credentials_directory_holds_one_private_file_per_secret(
    tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    creds = tmp_path / "creds"
    config = tmp_path / "config.yaml"
    flags = ["--yes", "--api-key", KEY, "--base-url", fake.base_url, "--channels", "none"]
    code = await perch(
        "onboard", "--config", str(config), *flags, "--secrets", "credentials",
        "--secrets-path", str(creds), "--no-doctor",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert stat.S_IMODE(creds.stat().st_mode) == 0o700
    key_file = creds / "anthropic_api_key"
    assert key_file.read_text() == KEY and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert f"LoadCredential=anthropic_api_key:{key_file}" in out
    api_key = yaml.safe_load(config.read_text())["providers"]["anthropic"]["api_key"]
    assert api_key == "${cred:anthropic_api_key}"
    os.environ["CREDENTIALS_DIRECTORY"] = str(creds)  # as systemd sets it for the unit
    try:
        assert load_config(config).providers.anthropic.api_key == KEY
    finally:
        del os.environ["CREDENTIALS_DIRECTORY"]


def test_bad_flags_say_how_to_write_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "onboard",
        "--config",
        str(tmp_path / "c.yaml"),
        "--yes",
        "--no-verify",
        "--api-key",
        "k",
    ]
    assert main([*args, "--channels", "fax"]) == 1
    assert "unknown platform 'fax'" in capsys.readouterr().err
    assert main([*args, "--env", "NOVALUE"]) == 1
    assert "write it as NAME=VALUE" in capsys.readouterr().err


@settings(max_examples=60)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Z_][A-Z0-9_]{0,12}", fullmatch=True),
        st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40),
        max_size=5,
    )
)
def test_env_file_round_trips_any_value(values: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "perch.env"
        path.write_text("# kept\nOTHER=1\n")
        write_env_file(path, values)
        write_env_file(path, values)  # a second write edits, never duplicates
        assert read_env_file(path) == {"OTHER": "1", **values}
        assert path.read_text().startswith("# kept\n")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_a_rerun_keeps_a_private_configs_mode_and_its_backups(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = tmp_path / "config.yaml"
    async with FakeTelegram() as telegram:
        flags = [
            "onboard",
            "--config",
            str(config),
            "--yes",
            "--no-doctor",
            "--api-key",
            KEY,
            "--base-url",
            fake.base_url,
            "--channels",
            "telegram",
            "--env",
            f"TELEGRAM_BOT_TOKEN={TOKEN}",
            "--set",
            f"channels.telegram.base_url={telegram.base_url}",
            "--secrets",
            "env",
            "--secrets-path",
            str(tmp_path / "perch.env"),
        ]
        assert await perch(*flags, "--owner", "telegram:1") == 0
        await asyncio.to_thread(config.chmod, 0o600)
        first = await asyncio.to_thread(config.read_text)
        assert await perch(*flags, "--owner", "telegram:2") == 0
    found = await asyncio.to_thread(lambda: list(tmp_path.glob("config.yaml.bak.*")))
    backups = sorted(found, key=lambda p: int(p.suffix[1:]))
    backup = backups[-1]  # the newest: what the second run replaced
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert backup.read_text() == first
    assert "2" in yaml.safe_load(config.read_text())["channels"]["telegram"]["allow_from"]
