"""A copy of the checkout as a fresh `git clone` would have it: tracked and new files, nothing
ignored (no venv, no local config, no data). For the tests that set up or build Perch from a
clean tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def clone(target: Path) -> Path:
    """Copy the checkout's tracked and untracked-but-not-ignored files into `target`."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"],
        capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target
