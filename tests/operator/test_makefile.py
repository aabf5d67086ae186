"""`make run` installs only what the daemon needs; `make test` adds the dev tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def planned(target: str, tmp_path: Path) -> list[str]:
    """The pip commands `make -n <target>` would run for a venv that does not exist yet."""
    out = subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return [line for line in out.splitlines() if "pip install" in line]


def test_make_run_installs_the_daemon_without_the_dev_tools(tmp_path: Path) -> None:
    run = planned("run", tmp_path)
    assert any(line.endswith("install --quiet -e .") for line in run)
    assert not any("[dev]" in line for line in run)


def test_make_test_adds_the_dev_tools(tmp_path: Path) -> None:
    assert any("'.[dev]'" in line for line in planned("test", tmp_path))


def commands(target: str, tmp_path: Path) -> list[str]:
    """Every command `make -n <target>` would run for a venv that does not exist yet."""
    return subprocess.run(
        ["make", "-n", target, f"VENV={tmp_path / 'venv'}"],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=60,
    ).stdout.splitlines()  # fmt: skip


def test_make_run_runs_on_the_checkouts_own_config(tmp_path: Path) -> None:
    """No --config: in the checkout that is config.local.yaml if you made one, else the
    tracked config.yaml."""
    perch = [line for line in commands("run", tmp_path) if "/bin/perch " in line]
    assert [line.split("/bin/perch ", 1)[1].strip() for line in perch] == ["init", "run"]


def test_make_test_builds_the_manual_strictly(tmp_path: Path) -> None:
    assert any("mkdocs build --strict" in line for line in commands("test", tmp_path))
