"""The agent's workspace folder: seeded from `bootstrap/` on `perch init` and first run.

`seed_workspace(workspace)` copies every template the workspace lacks (never overwriting the
owner's edits) and creates `memory/`. Each file is created through the one opener
(`agents.workspace_files.create_new`: linked into place only where the name is free), so a
symlink planted where a persona file belongs (even a dangling one) is left alone and logged
once, never followed to create a file elsewhere. The templates live in the repository's
`bootstrap/` folder (or `$PERCH_BOOTSTRAP`); an install from a wheel has them in
`<prefix>/share/perch/bootstrap`.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from agents.workspace_files import RefusedFile, create_new, note_refused, open_dir, workspace_root

log = logging.getLogger(__name__)
REPO_BOOTSTRAP = Path(__file__).resolve().parents[2] / "bootstrap"


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
    with workspace_root(workspace) as root:
        try:
            os.close(open_dir(root, ("memory",), create=True))
        except RefusedFile as exc:
            note_refused(str(workspace / "memory"), exc.why)
        except OSError:
            pass  # a file named memory: memory_append says so when it is used
    copied: list[str] = []
    if not templates.is_dir():
        return copied
    for source in sorted(templates.iterdir()):
        if not source.is_file():
            continue
        try:
            if create_new(workspace, (source.name,), source.read_bytes()):
                copied.append(source.name)
        except RefusedFile as exc:
            note_refused(str(workspace / source.name), exc.why)
        except OSError as exc:
            log.warning("workspace: %s could not be created (%s)", workspace / source.name, exc)
    return copied
