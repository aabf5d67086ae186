"""`perch run` as a process: layouts that would hand the model the daemon's own files are
refused (exit 78), so is exec without a working sandbox, what the daemon writes is private
to its user, and no password or token shows in an error, a log line or `perch doctor`.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.process.logs import RedactingFilter, Redactor
from tests.bot.test_daemon_process import Perch
from tests.fakes.anthropic import FakeAnthropic

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]
PASSWORD = "hunter2-very-secret"


def perch(config: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """`perch <args> --config config` as a process; (exit code, stdout + stderr)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot.operator.cli", *args, "--config", str(config)],
            cwd=config.parent,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "PYTHONPATH": str(REPO),
                "ANTHROPIC_API_KEY": "sk-ant-test-1234567890",
                **(env or {}),
            },
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return -1, f"still running after 30 s: {exc.stdout!r} {exc.stderr!r}"
    return done.returncode, done.stdout + done.stderr


def write(path: Path, data: dict[str, Any]) -> Path:
    base = {
        "providers": {
            "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": "http://127.0.0.1:9"}
        },
        "channels": {"console": {"enabled": False}},
        "heartbeat": {"every": 0},
    }
    path.write_text(yaml.safe_dump({**base, **data}))
    return path


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ({"agent": {"workspace": "."}}, "contains the state directory"),
        ({"agent": {"workspace": "./data"}}, "is the state directory"),
        ({"agent": {"workspace": "./ws"}, "store": {"path": "./ws/db/perch.db"}}, "contains"),
        ({"agent": {"workspace": "./ws"}, "logging": {"file": "./ws/perch.log"}}, "log file"),
        ({"agent": {"workspace": "./ws"}, "secret": "ws/key"}, "the secret file"),
        ({"agent": {"workspace": "./conf/ws"}, "config_in": "conf/ws"}, "the config file"),
    ],
)
def test_a_workspace_holding_what_the_model_must_not_reach_stops_the_start(
    tmp_path: Path, layout: dict[str, Any], problem: str
) -> None:
    data = {k: v for k, v in layout.items() if k not in ("secret", "config_in")}
    if "secret" in layout:
        key = tmp_path / layout["secret"]
        key.parent.mkdir(parents=True)
        key.write_text("sk-ant-secret-in-the-workspace")
        data["providers"] = {"anthropic": {"api_key": f"${{file:{key}}}"}}
    folder = tmp_path / layout.get("config_in", "")
    folder.mkdir(parents=True, exist_ok=True)
    if "config_in" in layout:
        data["agent"] = {"workspace": "."}
        data["store"] = {"path": str(tmp_path / "data" / "perch.db")}
    config = write(folder / "config.yaml", data)
    code, out = perch(config, "run")
    lines = [line for line in out.splitlines() if line.startswith("perch:")]
    assert code == 78, out
    assert len(lines) == 1 and "agent.workspace" in lines[0] and problem in lines[0], out
    code, out = perch(config, "doctor")
    assert "FAIL  layout: agent.workspace" in out and problem in out, out


def test_a_workspace_inside_the_credentials_directory_is_refused(tmp_path: Path) -> None:
    creds = tmp_path / "credentials"
    (creds / "ws").mkdir(parents=True)
    (creds / "anthropic_api_key").write_text("sk-ant-cred-secret-1234")
    data = {
        "agent": {"workspace": str(creds / "ws")},
        "providers": {"anthropic": {"api_key": "${cred:anthropic_api_key}"}},
    }
    code, out = perch(
        write(tmp_path / "config.yaml", data), "run", env={"CREDENTIALS_DIRECTORY": str(creds)}
    )
    assert code == 78 and "is inside the credentials directory" in out, out


def test_the_shipped_service_layout_is_accepted(tmp_path: Path) -> None:
    """/var/lib/perch/workspace beside /var/lib/perch/perch.db: the state stays out of it."""
    from bot.config.layout import layout_problem
    from bot.config.load import load_config

    data = {"agent": {"workspace": str(tmp_path / "state" / "workspace")}}
    data["store"] = {"path": str(tmp_path / "state" / "perch.db")}  # type: ignore[assignment]
    assert (
        layout_problem(
            load_config(write(tmp_path / "config.yaml", data), {"ANTHROPIC_API_KEY": "k"})
        )
        is None
    )


def test_exec_without_a_working_sandbox_exits_78(tmp_path: Path) -> None:
    config = write(tmp_path / "config.yaml", {"agent": {"exec": {"enabled": True}}})
    code, out = perch(config, "run", env={"PATH": str(tmp_path)})  # no bwrap on this PATH
    assert code == 78, out
    assert "install it (apt-get install bubblewrap)" in out


async def test_what_the_daemon_writes_is_its_users_alone(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        path = tmp_path / "config.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "providers": {
                        "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": fake.base_url}
                    },
                    "heartbeat": {"every": 0},
                    "logging": {"file": "./logs/perch.log"},
                }
            )
        )
        daemon = await Perch.start(path)
        made = [
            tmp_path / "data",
            tmp_path / "data" / "perch.db",
            tmp_path / "data" / "status.json",
            tmp_path / "logs" / "perch.log",
            tmp_path / "workspace" / "SOUL.md",
        ]
        await asyncio.wait_for(_exists(made[2]), 20)
        modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in made}
        code, err = await daemon.finish()
    assert code == 0, err
    assert {p: m for p, m in modes.items() if m & 0o077} == {}, modes


async def _exists(path: Path) -> None:
    while not await asyncio.to_thread(path.exists):  # noqa: ASYNC110 (its first beat writes it)
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    "store",
    [
        {"url": f"mysql://perch:{PASSWORD}@db/perch"},
        {"url": f"postgresql://perch:{PASSWORD}@127.0.0.1:port/perch"},
        {"url": f"postgresql://perch:{PASSWORD}@db/perch", "lease": "soon"},
    ],
)
def test_no_config_error_shows_a_password(tmp_path: Path, store: dict[str, str]) -> None:
    config = write(tmp_path / "config.yaml", {"store": store})
    for command in ("run", "doctor", "status"):
        code, out = perch(config, command)
        assert code == 78 and "store." in out, out
        assert PASSWORD not in out


def test_no_config_error_shows_a_token_whatever_key_holds_it(tmp_path: Path) -> None:
    token = "abcdefsecret1234567890"
    data = {"mcp": {"servers": {"x": {"url": "https://h/mcp", "headers": f"Bearer {token}"}}}}
    code, out = perch(write(tmp_path / "config.yaml", data), "run")
    assert code == 78 and "mcp.servers.x.headers" in out, out
    assert token not in out


def test_doctor_shows_no_password_of_an_unreachable_database(tmp_path: Path) -> None:
    config = write(
        tmp_path / "config.yaml",
        {"store": {"url": f"postgresql://perch:{PASSWORD}@127.0.0.1:1/perch"}},
    )
    _, out = perch(config, "doctor")
    assert "FAIL  database" in out, out
    assert PASSWORD not in out


def test_no_log_line_shows_a_url_password() -> None:
    """Through the daemon's own log filter (what `setup_logging` installs on every handler)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(Redactor([])))
    logger = logging.getLogger("perch.test.redaction")
    logger.addHandler(handler)
    try:
        logger.warning(
            "could not reach postgresql://perch:%s@db.internal/perch; retrying", PASSWORD
        )
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "postgresql://perch:***@db.internal/perch" in text and PASSWORD not in text
