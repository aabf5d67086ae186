"""`perch onboard` as a person meets it: no echo, answers checked and asked again, only the
questions that apply, offline with --no-verify, numbered backups, and nothing left for git."""

from __future__ import annotations

import asyncio
import os
import pty
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from tests.fakes.anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(120)
KEY = "sk-ant-onboard-123456"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


def clean_env(**extra: str) -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "TELEGRAM", "SLACK"))
    }
    keep.pop("PERCH_CONFIG", None)
    return {**keep, **extra}


async def onboard(cwd: Path, answers: list[str], *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.operator.cli", "onboard", *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env=clean_env(PYTHONPATH=str(REPO)), cwd=cwd,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(("\n".join(answers) + "\n").encode()), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    ).stdout


def read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while marker not in seen:
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker!r} never came: {bytes(seen)[-500:]!r}")
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            raise AssertionError(f"the process ended before {marker!r}: {bytes(seen)!r}") from None
        seen.extend(chunk)


def test_the_key_is_read_without_echo_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.operator.cli", "onboard", "--config", str(tmp_path / "c.yaml"),
         "--no-verify", "--channels", "none", "--secrets", "env", "--no-doctor"],
        stdin=slave, stdout=slave, stderr=slave, env=clean_env(), cwd=REPO, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = bytearray()
    try:
        read_until(master, b"(ANTHROPIC_API_KEY): ", seen)
        os.write(master, KEY.encode() + b"\r")
        read_until(master, b"base URL", seen)
        assert KEY.encode() not in seen  # the terminal did not echo it
        os.write(master, b"\r")
        read_until(master, b"Env file", seen)
        os.write(master, b"\r")
        assert proc.wait(timeout=60) == 0, bytes(seen)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert f"ANTHROPIC_API_KEY={KEY}" in (tmp_path / "perch.env").read_text()


async def test_a_bad_answer_is_asked_again_and_the_others_are_kept(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    answers = [
        "sk-ant-wrong", fake.base_url,  # refused live: asked again
        KEY, "",  # the URL given before is now the default
        "fax", "none",  # no such platform: asked again
        "vault", "env", "",  # env or credentials: asked again
    ]  # fmt: skip
    code, out, err = await onboard(tmp_path, answers, "--config", "config.yaml", "--no-doctor")
    assert code == 0, out + err
    assert "FAIL  model: the API key was rejected" in out and "Enter the values again" in out
    assert "unknown platform 'fax'" in out and "where secrets go: choose env or credentials" in out
    assert f"ANTHROPIC_BASE_URL={fake.base_url}" in (tmp_path / "perch.env").read_text()
    assert f"ANTHROPIC_API_KEY={KEY}" in (tmp_path / "perch.env").read_text()


@pytest.mark.parametrize(
    ("channel", "answers", "extra", "asked", "not_asked"),
    [
        ("telegram", ["123:abc", ""], [], ["token"], ["webhook_secret"]),
        ("slack", ["xoxb-1", "xapp-1", ""], [], ["bot_token", "app_token"], ["signing_secret"]),
        (
            "slack",
            ["xoxb-1", "s3cret", ""],
            ["--set", "channels.slack.mode=http"],
            ["bot_token", "signing_secret"],
            ["app_token"],
        ),
    ],
)
async def test_only_the_secrets_the_chosen_mode_needs_are_asked(
    tmp_path: Path,
    channel: str,
    answers: list[str],
    extra: list[str],
    asked: list[str],
    not_asked: list[str],
) -> None:
    flags = ["--config", "c.yaml", "--api-key", KEY, "--base-url", "http://127.0.0.1:9", "--channels", channel,
             "--secrets", "env", "--secrets-path", "perch.env", "--no-verify", *extra]  # fmt: skip
    code, out, err = await onboard(tmp_path, answers, *flags)
    assert code == 0, out + err
    for key in asked:
        assert f"{channel}: {key} (" in out
    for key in not_asked:
        assert f": {key} (" not in out
    assert yaml.safe_load((tmp_path / "c.yaml").read_text())["channels"][channel]["enabled"]


async def test_no_verify_sets_up_offline_without_a_single_call(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    flags = ["--config", "c.yaml", "--yes", "--no-verify", "--api-key", "sk-ant-anything",
             "--base-url", fake.base_url, "--channels", "none"]  # fmt: skip
    code, out, err = await onboard(tmp_path, [], *flags)
    assert code == 0, out + err
    assert fake.requests == [] and "Running perch doctor" not in out
    config = yaml.safe_load((tmp_path / "c.yaml").read_text())
    assert config["secrets"]["env_file"] == "perch.env"


async def test_a_new_folder_is_made_and_backups_are_numbered(tmp_path: Path) -> None:
    target = tmp_path / "new" / "folder" / "config.yaml"
    flags = [
        "--config",
        str(target),
        "--yes",
        "--no-verify",
        "--api-key",
        KEY,
        "--channels",
        "none",
    ]
    for run in range(3):
        code, out, err = await onboard(tmp_path, [], *flags, "--set", f"agent.id=run{run}")
        assert code == 0, out + err
    assert "Traceback" not in err
    backups = sorted(p.name for p in target.parent.glob("config.yaml.bak.*"))
    assert backups == ["config.yaml.bak.1", "config.yaml.bak.2"]
    assert "id: run0" in (target.parent / "config.yaml.bak.1").read_text()
    assert "id: run1" in (target.parent / "config.yaml.bak.2").read_text()


async def test_gitignore_covers_every_file_onboard_writes_in_a_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "clone"
    (checkout / "bot" / "operator").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", checkout)
    shutil.copy(REPO / ".gitignore", checkout)
    shutil.copy(REPO / "config.yaml", checkout)  # the tracked default, which stays as it is
    (checkout / "bot" / "operator" / "cli.py").write_text("")
    await asyncio.to_thread(git, checkout, "init", "-q")
    await asyncio.to_thread(git, checkout, "add", "-A")
    before = await asyncio.to_thread(git, checkout, "status", "--porcelain", "-uall")
    flags = ["--yes", "--no-verify", "--api-key", KEY, "--channels", "none"]
    for place in ("env", "credentials", "env"):  # with a re-run: backups too
        code, out, err = await onboard(checkout, [], *flags, "--secrets", place)
        assert code == 0, out + err
    written = {p.relative_to(checkout).parts[0] for p in checkout.iterdir()}
    assert {"config.local.yaml", "perch.env", "credentials", "workspace", "data"} <= written
    assert "config.local.yaml.bak.2" in written
    after = await asyncio.to_thread(git, checkout, "status", "--porcelain", "-uall")
    assert after == before  # everything onboard wrote is ignored
