"""The agent's workspace folder: seeded from `bootstrap/` on `perch init` and first run.

`seed_workspace(workspace)` copies every template the workspace lacks (never overwriting the
owner's edits) and creates `memory/`. The templates live in the repository's `bootstrap/`
folder (or `$PERCH_BOOTSTRAP`); an install from a wheel has them in
`<prefix>/share/perch/bootstrap`.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO_BOOTSTRAP = Path(__file__).resolve().parent.parent / "bootstrap"


def bootstrap_dir() -> Path:
    override = os.environ.get("PERCH_BOOTSTRAP")
    if override:
        return Path(override)
    if REPO_BOOTSTRAP.is_dir():
        return REPO_BOOTSTRAP
    return Path(sys.prefix) / "share" / "perch" / "bootstrap"  # installed from a wheel


def seed_workspace(workspace: Path, templates: Path | None = None) -> list[str]:
    """Copy missing templates into `workspace`; returns the names copied."""
    templates = templates or bootstrap_dir()
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "memory").mkdir(exist_ok=True)
    copied: list[str] = []
    if not templates.is_dir():
        return copied
    for source in sorted(templates.iterdir()):
        target = workspace / source.name
        if source.is_file() and not target.exists():
            shutil.copyfile(source, target)
            copied.append(source.name)
    return copied
