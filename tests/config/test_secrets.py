"""Secrets out of reach: `${file:}` / `${cred:}` in the config, the daemon made non-dumpable,
and doctor's lines about the exec sandbox and secrets left in the environment."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config.errors import EXIT_CONFIG, ConfigError
from bot.config.load import load_config
from bot.operator.cli import main
from bot.operator.doctor_exec import exec_checks
from tests.harness import make_config

SECRET = "sk-ant-very-secret-value-42"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_file_reference_reads_the_secret_and_drops_one_newline(tmp_path: Path) -> None:
    key = write(tmp_path / "anthropic", SECRET + "\n")
    cfg = write(tmp_path / "c.yaml", f"providers:\n  anthropic:\n    api_key: ${{file:{key}}}\n")
    assert load_config(cfg, env={}).providers.anthropic.api_key == SECRET


def test_credentials_from_the_systemd_credentials_directory(tmp_path: Path) -> None:
    creds = tmp_path / "creds"
    creds.mkdir()
    write(creds / "anthropic", SECRET)
    write(creds / "telegram", "123:abc\n")
    cfg = write(
        tmp_path / "c.yaml",
        "providers:\n  anthropic:\n    api_key: ${cred:anthropic}\n"
        "channels:\n  telegram:\n    token: ${file:${CREDENTIALS_DIRECTORY}/telegram}\n",
    )
    config = load_config(cfg, env={"CREDENTIALS_DIRECTORY": str(creds)})
    assert config.providers.anthropic.api_key == SECRET
    assert config.channels.telegram.token == "123:abc"


@pytest.mark.parametrize(
    ("value", "env", "fragment"),
    [
        ("${file:/nonexistent/perch/key}", {}, "cannot read secret file /nonexistent/perch/key"),
        ("${file:relative/key}", {}, "needs an absolute path"),
        ("${cred:anthropic}", {}, "CREDENTIALS_DIRECTORY is not set"),
        ("${cred:../etc/shadow}", {"CREDENTIALS_DIRECTORY": "/tmp"}, "not a credential name"),
        ("${cred:missing}", {"CREDENTIALS_DIRECTORY": "/nonexistent"}, "LoadCredential=missing"),
    ],
)
def test_unreadable_secrets_are_one_line_errors_naming_the_key(
    tmp_path: Path, value: str, env: dict[str, str], fragment: str
) -> None:
    cfg = write(tmp_path / "c.yaml", f"providers:\n  anthropic:\n    api_key: {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env=env)
    message = str(info.value)
    assert "\n" not in message
    assert "providers.anthropic.api_key" in message and fragment in message


def test_the_cli_exits_78_on_a_missing_secret_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write(tmp_path / "c.yaml", "providers:\n  anthropic:\n    api_key: ${file:/no/such}\n")
    assert main(["run", "--config", str(cfg)]) == EXIT_CONFIG
    assert "providers.anthropic.api_key: cannot read secret file" in capsys.readouterr().err
    # Commands that never use the secret only note it (issue 16).
    assert main(["status", "--config", str(cfg)]) == 0
    assert "cannot read secret file /no/such" in capsys.readouterr().out


def test_secret_values_never_appear_in_validation_errors(tmp_path: Path) -> None:
    port = write(tmp_path / "port", SECRET)
    cfg = write(
        tmp_path / "c.yaml",
        f"agent:\n  max_tokens: ${{file:{port}}}\nchannels:\n"
        f"  telegram:\n    webhook_port: 'x${{file:{port}}}'\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={})
    assert SECRET not in str(info.value)
    assert "agent.max_tokens" in str(info.value) and "webhook_port" in str(info.value)


def test_the_daemon_can_make_itself_non_dumpable() -> None:
    code = (
        "import ctypes; from bot.process.hardening import make_undumpable; ok = make_undumpable(); "
        "libc = ctypes.CDLL(None); print(ok, libc.prctl(3, 0, 0, 0, 0))"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True
    )
    expected = "True 0" if sys.platform.startswith("linux") else "False"
    assert done.stdout.split()[: len(expected.split())] == expected.split()


def test_doctor_names_the_sandbox_mode_and_warns_about_environment_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = make_config(tmp_path, "http://127.0.0.1:9")
    assert [c.line() for c in exec_checks(off)] == [
        "OK    exec: disabled: the model cannot run commands"
    ]
    bare = make_config(
        tmp_path, "http://127.0.0.1:9", {"agent.exec": {"enabled": True, "sandbox": "none"}}
    )
    env = {"ANTHROPIC_API_KEY": "x", "DATABASE_URL": "postgres://u:pw@db/x", "LANG": "C"}
    lines = [c.line() for c in exec_checks(bare, env)]
    assert lines[0].startswith("WARN  exec sandbox: none: commands run unsandboxed")
    assert lines[1].startswith(
        "WARN  secrets: exec is on and the environment holds ANTHROPIC_API_KEY, DATABASE_URL"
    )
    assert "pw" not in lines[1]
    assert exec_checks(bare, {"LANG": "C", "SSH_AUTH_SOCK": "/run/x"})[1:] == []
    if shutil.which("bwrap"):
        sandboxed = make_config(tmp_path, "http://127.0.0.1:9", {"agent.exec": {"enabled": True}})
        first = exec_checks(sandboxed, {})[0]
        assert first.ok and not first.warn and first.detail.startswith("bwrap (")
    monkeypatch.setenv("PATH", str(tmp_path))  # now no bwrap anywhere
    missing = make_config(tmp_path, "http://127.0.0.1:9", {"agent.exec": {"enabled": True}})
    failed = exec_checks(missing, {})[0]
    assert not failed.ok and "bubblewrap (bwrap) is not installed" in failed.detail
