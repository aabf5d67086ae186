"""`perch store backup`: one consistent copy of the store, taken while Perch runs or not.

SQLite: the library's online backup (`sqlite3.Connection.backup`) into a new file, a snapshot
even while the daemon writes (WAL); the copy is a working Perch database (point `store.path`
at it to restore). PostgreSQL: `pg_dump --format=custom` (one snapshot of the database),
restored with `pg_restore`; the password travels in the environment (`PGPASSWORD`), never on
a command line. Either copy is written beside its final name and renamed into place, mode
0600, in a folder only its owner reads (`<state directory>/backups` unless `--to` says).
This module sits above both backends, like `open.py`; it needs neither.
"""

from __future__ import annotations

import glob
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from bot.store.urls import is_postgres_url, redact_url


class BackupFailed(RuntimeError):
    """The copy could not be made; the message says why and what to do."""


def default_target(folder: Path, where: Path | str, now: float | None = None) -> Path:
    """`<folder>/perch-<UTC time>.<db|dump>`: the name `perch store backup` picks."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    suffix = "dump" if is_postgres_url(where) else "db"
    return folder / f"perch-{stamp}.{suffix}"


def back_up(where: Path | str, target: Path) -> Path:
    """Copy the store at `where` (an SQLite file or a `postgresql://` URL) to `target`."""
    if target.exists():
        raise BackupFailed(f"{target} already exists; choose another name with --to")
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        if is_postgres_url(where):
            _dump_postgres(str(where), partial)
        else:
            _copy_sqlite(Path(where), partial)
        os.chmod(partial, 0o600)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _copy_sqlite(path: Path, partial: Path) -> None:
    if not path.exists():
        raise BackupFailed(f"{path} does not exist: nothing to back up")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # private from birth
    os.close(fd)
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
        finally:
            copy.close()
    except sqlite3.Error as exc:
        raise BackupFailed(f"{path}: cannot copy it ({exc})") from None
    finally:
        source.close()


def _dump_postgres(url: str, partial: Path) -> None:
    program = pg_dump_program()
    if program is None:
        raise BackupFailed(
            "pg_dump is not installed: install PostgreSQL's client programs (Debian: apt-get "
            "install postgresql-client, of the server's major version or newer)"
        )
    parts = urlsplit(url)
    env = dict(os.environ)
    if parts.password is not None:
        env["PGPASSWORD"] = unquote(parts.password)
        host = parts.netloc.rsplit("@", 1)[-1]
        user = f"{parts.username}@" if parts.username else ""
        url = urlunsplit(parts._replace(netloc=user + host))
    done = subprocess.run(
        [program, "--format=custom", "--no-owner", f"--file={partial}", f"--dbname={url}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=6 * 3600,
        check=False,
    )
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[:500]
        raise BackupFailed(f"pg_dump of {redact_url(url)} failed: {said}")


def pg_dump_program() -> str | None:
    """`pg_dump` on PATH, else the newest in Debian's PostgreSQL folders."""
    found = shutil.which("pg_dump")
    if found:
        return found
    versions = glob.glob("/usr/lib/postgresql/*/bin/pg_dump")
    return max(versions, key=_major, default=None)


def _major(program: str) -> int:
    """The major version in `/usr/lib/postgresql/<major>/bin/pg_dump`."""
    folder = Path(program).parent.parent.name
    return int(folder) if folder.isdigit() else 0
