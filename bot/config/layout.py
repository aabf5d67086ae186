"""Where the workspace may be: apart from everything the model must never reach.

The workspace is what the model works in: `exec` and the file tools can read and change all of
it. `protected(config)` lists what must stay out of it: the state directory (the database,
the control socket, `status.json`), the config file, every `${file:}`/`${cred:}` secret file,
the systemd credentials directory and the log file. `layout_problem(config)` is the one line
that stops `perch run` (exit 78) and that `perch doctor` reports when the workspace contains
one of them (or is the state directory, or sits inside the credentials directory): such a
layout is refused, not trusted. A workspace inside the state directory, as the shipped unit
has it (`/var/lib/perch/workspace` beside `/var/lib/perch/perch.db`), exposes nothing and is
allowed. The same refusal holds for a hard link: a protected file with a second name inside
the workspace or a `skills.paths` folder (found by its inode) is refused, as the file itself
would be. `layout_warnings(config)` says what works but deserves a move, for `perch doctor`
and the daemon's start: a secret file inside a `skills.paths` folder (masked in every
sandbox and refused by `read_skill`, but better kept apart) and a secret file other users
can read (wider than 0600). `sandbox_hidden(config)` is the list for the sandboxes to mask,
`unreadable(config)` for the tools that read by path outside the workspace.
"""

from __future__ import annotations

import os
import stat
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
    return _hard_link_problem(config)


MAX_WALKED = 50_000  # entries looked at when searching the model's folders for a hard link


def _model_folders(config: Config) -> list[Path]:
    """The folders whose files a tool may read: the workspace and every `skills.paths`."""
    return [config.workspace, *(config.resolve(p) for p in config.skills.paths)]


def _hard_link_problem(config: Config) -> str | None:
    """A protected file that also has a name in the workspace or a skill folder."""
    linked: dict[tuple[int, int], Protected] = {}
    for item in protected(config):
        try:
            info = os.stat(item.path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            linked[(info.st_dev, info.st_ino)] = item
    if not linked:
        return None
    walked = 0
    for folder in _model_folders(config):
        for root, dirs, files in os.walk(folder):
            for name in files:
                walked += 1
                try:
                    info = os.lstat(os.path.join(root, name))
                except OSError:
                    continue
                original = linked.get((info.st_dev, info.st_ino))
                if original is not None:
                    return (
                        f"{os.path.join(root, name)} is a hard link to {original.what} "
                        f"{original.path}: "
                        "the model could read it there; delete that link (rm it, the original "
                        "stays)"
                    )
            if walked > MAX_WALKED:
                dirs.clear()
    return None


def layout_warnings(config: Config) -> list[str]:
    """What works but should move: secret files in skill folders or readable by others."""
    found: list[str] = []
    skill_folders = [_real(config.resolve(p)) for p in config.skills.paths]
    for path in config.secret_files:
        real = _real(path)
        folder = next((f for f in skill_folders if real.is_relative_to(f)), None)
        if folder is not None:
            found.append(
                f"the secret file {path} lies in the skills.paths folder {folder}: it is masked "
                "in the sandbox and refused by read_skill, but keep secrets out of skill folders"
            )
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            continue
        if mode & 0o077:
            found.append(
                f"the secret file {path} can be read by other users (mode {mode:04o}); "
                f"chmod 600 {path}"
            )
    return found


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
