"""Day two from a fresh clone and a fresh HOME, with nothing exported: `perch onboard`, then
in a new shell `perch status`, `perch doctor` and `perch run` work; and the same outside a
checkout from a non-editable install (`pip install .`), where the config goes to
`~/.config/perch/` and the template (the checkout's `config.yaml`) and persona files come
from the installed package.

Every command runs as its own process with only PATH and HOME in its environment.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import sysconfig
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.anthropic import FakeAnthropic
from tests.fresh_clone import clone

pytestmark = pytest.mark.timeout(240)
REPO = Path(__file__).resolve().parents[2]
KEY = "sk-ant-fresh-0123456789"


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic(api_key=KEY) as server:
        yield server


class Shell:
    """A new shell each time: only PATH and HOME, nothing sourced or exported."""

    def __init__(self, perch: list[str], cwd: Path, home: Path) -> None:
        self.perch, self.cwd = perch, cwd
        self.env = {"PATH": os.environ["PATH"], "HOME": str(home)}

    async def run(self, *args: str, timeout: float = 120) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            *self.perch, *args, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        assert proc.returncode is not None
        return proc.returncode, out.decode()

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.perch, *args, cwd=self.cwd, env=self.env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip


async def day_two(shell: Shell, fake: FakeAnthropic) -> str:
    """onboard, then status, doctor, run (with a chat turn through it); the run's stderr."""
    code, out = await shell.run(
        "onboard", "--yes", "--no-verify", "--api-key", KEY, "--base-url", fake.base_url,
        "--channels", "none",
    )  # fmt: skip
    assert code == 0, out
    assert fake.requests == []  # --no-verify: nothing was called
    code, out = await shell.run("status")
    assert code == 0 and "Perch is not running" in out, out
    assert "not set" not in out
    code, out = await shell.run("doctor")
    assert code == 0 and "All checks passed." in out, out
    return await one_turn_through_run(shell)


async def one_turn_through_run(shell: Shell) -> str:
    """`perch run` until it answers, a `perch chat` turn through it, SIGTERM; its stderr."""
    daemon = await shell.start("run")
    try:
        for _ in range(600):  # until it answers on its control socket (bounded)
            code, out = await shell.run("status")
            if "Perch is running" in out:
                break
            assert daemon.returncode is None, out
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"perch run never came up: {out}")
        code, out = await shell.run("chat", "-m", "hello from a new shell")
        assert code == 0 and "hello from a new shell" in out, out
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(daemon.communicate(), 60)
    assert daemon.returncode == 0, err.decode()[-2000:]
    return err.decode()


async def test_a_fresh_clone_works_in_a_new_shell_after_onboard(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    checkout = await asyncio.to_thread(clone, tmp_path / "perch")
    home = tmp_path / "home"
    home.mkdir()
    shell = Shell([sys.executable, "-m", "bot.operator.cli"], checkout, home)
    shipped = (checkout / "config.yaml").read_bytes()
    err = await day_two(shell, fake)
    assert (checkout / "config.local.yaml").exists() and (checkout / "perch.env").exists()
    assert (checkout / "config.yaml").read_bytes() == shipped  # the tracked default unchanged
    assert "stdin is not a terminal" in err and KEY not in err
    assert not (home / ".config").exists()  # in a checkout, the checkout's config.yaml


async def test_a_fresh_clone_runs_on_the_tracked_config_as_it_is(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    """What `make run` does after setting up the venv: `perch init`, `perch run`, no
    `--config`, stdin not a terminal; only the model key and endpoint in the environment."""
    checkout = await asyncio.to_thread(clone, tmp_path / "perch")
    shipped = (checkout / "config.yaml").read_bytes()
    home = tmp_path / "home"
    home.mkdir()
    shell = Shell([sys.executable, "-m", "bot.operator.cli"], checkout, home)
    shell.env |= {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": fake.base_url}
    code, out = await shell.run("init")
    assert code == 0 and "Wrote" not in out, out  # nothing to write: config.yaml is there
    err = await one_turn_through_run(shell)
    assert KEY not in err
    assert (checkout / "config.yaml").read_bytes() == shipped
    assert not (checkout / "config.local.yaml").exists()
    assert (checkout / "workspace" / "SOUL.md").exists() and (checkout / "data").is_dir()


async def test_a_non_editable_install_keeps_its_config_in_the_user_config_folder(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    source = await asyncio.to_thread(clone, tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess_run = asyncio.to_thread
    await subprocess_run(
        subprocess.run, [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    site = (
        venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    )
    (site / "perch_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
               "--no-index", "--no-build-isolation", "--ignore-installed", str(source)]  # fmt: skip
    done = await subprocess_run(subprocess.run, install, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    packaged = venv / "share" / "perch" / "config.yaml"  # the shipped config, as data
    assert (
        not packaged.is_symlink() and packaged.read_bytes() == (REPO / "config.yaml").read_bytes()
    )
    for asset in ("templates/base.html", "templates/usage.html", "static/app.css", "static/app.js"):
        assert (site / "bot" / "web" / asset).is_file(), asset  # the dashboard's package data
    home = tmp_path / "home"
    home.mkdir()
    shell = Shell([str(venv / "bin" / "perch")], home, home)  # not in a checkout
    await day_two(shell, fake)
    config = home / ".config" / "perch" / "config.yaml"
    assert config.read_text().startswith("# Perch configuration")  # the packaged template
    assert (config.parent / "workspace" / "SOUL.md").exists()  # the packaged persona files
