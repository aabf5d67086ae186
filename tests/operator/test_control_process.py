"""The control socket between real processes: `perch run` serving, `perch ...` asking.

The CLI processes get no model key and no channel secrets: only `perch run` has them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from pathlib import Path

import pytest

from tests.bot.test_daemon_process import Perch, write_config
from tests.fakes.anthropic import FakeAnthropic, Reply
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


async def perch_cli(config: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.operator.cli",
        *args,
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=config.parent,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_talks_to_a_running_perch_process_without_its_secrets(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        config = write_config(tmp_path, fake.base_url)
        sock = tmp_path / "data" / "perch.sock"
        daemon = await Perch.start(config)
        try:
            await eventually(sock.exists, timeout=30)
            assert stat.S_IMODE(sock.stat().st_mode) == 0o600

            code, out, err = await perch_cli(config, "status")
            assert code == 0, err
            assert f"Perch is running (pid {daemon.proc.pid}" in out
            assert "channel console: up" in out

            fake.queue(Reply.text("Pong from the daemon."))
            code, out, err = await perch_cli(config, "chat", "-m", "ping")
            assert (code, out) == (0, "Pong from the daemon.\n"), err

            code, out, err = await perch_cli(config, "send", "--to", "owner", "Hello, terminal")
            assert code == 0, err
            await daemon.expect("Hello, terminal")

            code, out, err = await perch_cli(config, "cron", "add", "--every", "10s", "-m", "x")
            assert code == 2 and "allow_fast" in err and "--allow-fast" in err
            code, out, err = await perch_cli(config, "cron", "add", "--every", "2h", "-m", "x")
            assert code == 0 and "Scheduled in the running daemon." in out, err
        finally:
            code, err = await daemon.finish()
        assert code == 0, err
        assert not sock.exists()
        code, out, _ = await perch_cli(config, "status")
        assert code == 0 and out.startswith("Perch is not running.")
        code, _, err = await perch_cli(config, "send", "--to", "owner", "x")
        assert code == 1 and "Perch is not running" in err


async def test_second_ctrl_c_forces_exit(tmp_path: Path) -> None:
    async with FakeAnthropic() as fake:
        config = write_config(tmp_path, fake.base_url)
        fake.queue(Reply.hang())
        daemon = await Perch.start(config)
        await daemon.say("think forever")
        await fake.wait_requests(1, timeout=30)
        daemon.proc.send_signal(signal.SIGINT)
        await daemon.expect("Stopping Perch: waiting for 1 running reply")  # says what it waits for
        daemon.proc.send_signal(signal.SIGINT)  # the clean stop waits for the hung run
        code, err = await daemon.finish()
        assert code == 130, err
        assert "second interrupt" in (tmp_path / "data" / "perch.log").read_text()
