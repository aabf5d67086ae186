"""Where the workspace may be: apart from everything the model must never reach.

The workspace is what the model works in: `exec` and the file tools can read and change all of
it. `protected(config)` lists what must stay out of it: the state directory (the database,
the control socket, `status.json`), the config file, every `${file:}`/`${cred:}` secret file,
the systemd credentials directory and the log file. `layout_problem(config)` is the one line
that stops `perch run` (exit 78) and that `perch doctor` reports when the workspace contains
one of them (or is the state directory, or sits inside the credentials directory): such a
layout is refused, not trusted. A workspace inside the state directory, as the shipped unit
has it (`/var/lib/perch/workspace` beside `/var/lib/perch/perch.db`), exposes nothing and is
allowed. `sandbox_hidden(config)` is the same list for the sandboxes to mask.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bot.config.errors import ConfigError
from bot.config.paths import socket_path
from bot.config.schema import Config


@dataclass(frozen=True, slots=True)
class Protected:
    path: Path
    what: str
    no_workspace_inside: bool = False  # the workspace may not sit inside it either


def protected(config: Config) -> list[Protected]:
    """What the model must never reach, for the layout check and the sandboxes' masks."""
    state = config.db_path.parent
    found = [
        Protected(state, "the state directory (database, control socket, status file)"),
        Protected(config.db_path, "the database"),
        Protected(socket_path(config), "the control socket"),
    ]
    if config.source is not None:
        found.append(Protected(config.source, "the config file"))
    found += [Protected(path, "the secret file") for path in config.secret_files]
    if config.credentials_dir is not None:
        found.append(Protected(config.credentials_dir, "the credentials directory", True))
    if config.logging.file is not None:
        found.append(Protected(config.resolve(config.logging.file), "the log file"))
    return found


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def layout_problem(config: Config) -> str | None:
    """Why this workspace may not be used, in one line, or None when it is apart."""
    workspace = _real(config.workspace)
    for item in protected(config):
        real = _real(item.path)
        if real == workspace or real.is_relative_to(workspace):
            where = "is" if real == workspace else "contains"
            return (
                f"agent.workspace {config.workspace} {where} {item.what} {item.path}: the model "
                "could read or change it with exec and the file tools; keep the workspace in "
                "a folder of its own (e.g. workspace: ./workspace, store.path: ./data/perch.db)"
            )
        if item.no_workspace_inside and workspace.is_relative_to(real):
            return (
                f"agent.workspace {config.workspace} is inside {item.what} {item.path}; keep "
                "the workspace in a folder of its own"
            )
    return None


def require_apart(config: Config) -> None:
    """ConfigError (exit 78) when the workspace holds what the model must never reach."""
    problem = layout_problem(config)
    if problem is not None:
        raise ConfigError(problem)


def unreadable(config: Config) -> list[Path]:
    """Every protected path (and its real path) for the tools that read by path outside the
    workspace (`read_skill`): what no tool may return, wherever it lies."""
    paths = [item.path for item in protected(config)]
    return [*dict.fromkeys([*paths, *(_real(p) for p in paths)])]


def sandbox_hidden(config: Config) -> list[Path]:
    """Every protected path (and its real path, if a link leads there) for the sandboxes to
    mask: the config's folder too, which usually holds more than the config file."""
    paths: list[Path] = []
    if config.source is not None:
        paths.append(config.source.parent)
    for item in protected(config):
        paths.append(item.path)
    return [*dict.fromkeys([*paths, *(_real(p) for p in paths)])]
