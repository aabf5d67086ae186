"""`perch run` with the console, on a real pseudo-terminal and without one: the prompt,
typing during a reply, what the first Ctrl-C waits for, and stdin closed or /dev/null."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from channels.console import THINKING
from channels.terminal import PROMPT
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.pty_perch import PtyPerch

pytestmark = pytest.mark.timeout(90)
ENV = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def write_config(tmp_path: Path, base_url: str, **extra: object) -> Path:
    path = tmp_path / "config.yaml"
    data = {
        "providers": {"anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": base_url}},
        "heartbeat": {"every": 0},
        "gateway": {"shutdown_grace": "5s"},
        **extra,
    }
    path.write_text(yaml.safe_dump(data))
    return path


async def test_typing_during_a_reply_stays_on_the_prompt_line_and_ctrl_c_says_what_it_waits_for(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    gate = asyncio.Event()
    fake.default = lambda body: Reply.text("echo: " + last_user_text(body), hold=gate)
    perch = await PtyPerch.start(write_config(tmp_path, fake.base_url), ENV)
    try:
        await perch.until(lambda: perch.view.last() == PROMPT, what="the prompt")
        await perch.say("first question")
        await fake.wait_requests(1, timeout=20)
        await perch.until(lambda: perch.view.last() == f"{THINKING}  {PROMPT}", what="thinking")
        await perch.type("typed meanwhile")  # the terminal does not echo it into the line
        await perch.until(lambda: perch.view.last() == f"{THINKING}  {PROMPT}typed meanwhile")
        await perch.type("\x03")  # Ctrl-C: a clean stop, waiting for the reply
        await perch.expect("Stopping Perch: waiting for 1 running reply (up to 5 s)")
        assert "Ctrl-C again to quit at once" in perch.raw
        gate.set()
        await perch.expect("perch> echo: first question")
        code, err = await perch.finish()
    finally:
        perch.close()
    assert code == 0, err
    screen = perch.screen()
    assert f"{PROMPT}first question" in screen and "perch> echo: first question" in screen
    assert not any("typed meanwhile" in row and THINKING not in row for row in screen[:-1])
    log = (tmp_path / "data" / "perch.log").read_text()  # the log went to a file, not the chat
    assert "Perch ready" in log and "Perch ready" not in perch.raw


@pytest.mark.parametrize("stdin", ["devnull", "closed"])
async def test_without_a_terminal_the_console_is_off_and_the_daemon_runs(
    tmp_path: Path, fake: FakeAnthropic, stdin: str
) -> None:
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify.sock"))
    notify.setblocking(False)
    config = write_config(tmp_path, fake.base_url)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.operator.cli", "run", "--config", str(config),
        stdin=asyncio.subprocess.DEVNULL if stdin == "devnull" else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**ENV, "NOTIFY_SOCKET": str(tmp_path / "notify.sock")}, cwd=tmp_path,
        preexec_fn=(lambda: os.close(0)) if stdin == "closed" else None,
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    ready = await asyncio.wait_for(loop.sock_recv(notify, 4096), 30)
    assert b"READY=1" in ready  # it runs, without the console
    proc.send_signal(signal.SIGTERM)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    notify.close()
    text = err.decode()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "isatty" not in text
    assert text.count("stdin is not a terminal, so the console channel is off") == 1
    assert out == b""
