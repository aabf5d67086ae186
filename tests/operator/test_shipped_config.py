"""The shipped config has one source: the checkout's tracked `config.yaml`. A wheel built from
a fresh clone carries exactly its bytes (as data under `share/perch/`) and no second copy."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fresh_clone import REPO, clone

pytestmark = pytest.mark.timeout(240)


def test_a_wheel_built_from_the_checkout_carries_config_yaml_byte_for_byte(
    tmp_path: Path,
) -> None:
    source = clone(tmp_path / "src")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("perch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        shipped = [n for n in names if n.endswith(".data/data/share/perch/config.yaml")]
        assert len(shipped) == 1, names
        assert archive.read(shipped[0]) == (REPO / "config.yaml").read_bytes()
    copies = [n for n in names if n.endswith((".yaml", ".yml")) and n != shipped[0]]
    assert not [n for n in copies if n.startswith(("bot/", "agents/", "channels/"))]


def test_the_tracked_config_is_the_only_one_in_the_checkout() -> None:
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "config.yaml", "bot/config/template.yaml"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert tracked == ["config.yaml"]
