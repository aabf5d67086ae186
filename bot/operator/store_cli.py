"""`perch store migrate --to postgresql://...`: copy the SQLite store into PostgreSQL, one way;
`perch store backup [--to PATH]`: a consistent copy of the store now (`bot/store/backup.py`).

The copy holds the SQLite file's instance lock (so the daemon must be stopped, and cannot
start meanwhile), refuses a target that already holds data, copies every table in
`bot.store.rows.COPY_COLUMNS` with its ids, and leaves the SQLite file untouched. Afterwards the
user sets `store.url` and restarts Perch. `register(sub, add)` adds the subcommand.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from bot.config.load import load_config
from bot.config.paths import config_path
from bot.config.schema import Config
from bot.store.backup import BackupFailed, back_up, default_target
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import COPY_COLUMNS, AlreadyRunning, StoreUnavailable
from bot.store.urls import is_postgres_url, redact_url


class CopyRefused(RuntimeError):
    """The copy cannot start; the message says why and what to do."""


def register(sub: Any, add: Any) -> None:
    """Add `perch store` to the parser (called by `bot.operator.cli.build_parser`)."""
    store = add("store", cmd_store, "back up the database, or move it to another backend")
    actions = store.add_subparsers(dest="action", required=True)
    text = "copy the SQLite database (store.path) into an empty PostgreSQL database"
    migrate = actions.add_parser("migrate", help=text, description=text)
    migrate.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    migrate.add_argument("--to", required=True, metavar="URL", help="postgresql://user@host/db")
    text = (
        "copy the database as it is now into a file (SQLite: a database file; PostgreSQL: pg_dump)"
    )
    backup = actions.add_parser("backup", help=text, description=text)
    backup.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    backup.add_argument(
        "--to", metavar="PATH", help="the file to write (default: <state directory>/backups/...)"
    )


async def copy_store(source: Store, target: Store) -> dict[str, int]:
    """Copy every table from `source` into the empty `target`; rows copied per table."""
    if not await target.is_empty():
        raise CopyRefused(
            f"{target.location} already holds Perch data; migrate into an empty database"
        )
    counts: dict[str, int] = {}
    for table in COPY_COLUMNS:
        counts[table] = 0
        async for rows in source.dump(table):
            await target.load(table, rows)
            counts[table] += len(rows)
    await target.finish_load()
    return counts


def cmd_store(args: argparse.Namespace) -> int:
    # The copy needs no model key: the config is read like perch status reads it.
    config = load_config(config_path(getattr(args, "config", None)), lenient=True)
    if args.action == "backup":
        return _backup(config, args.to)
    url: str = args.to
    if not is_postgres_url(url):
        print(f"perch: --to {url!r}: give a postgresql:// URL", file=sys.stderr)
        return 2
    if not config.db_path.exists():
        print(f"perch: {config.db_path} does not exist: nothing to migrate", file=sys.stderr)
        return 1
    try:
        counts = asyncio.run(_migrate(config.db_path, url))
    except (CopyRefused, AlreadyRunning) as exc:
        print(f"perch: {exc}", file=sys.stderr)
        return 1
    except StoreUnavailable as exc:
        print(f"perch: {redact_url(url)}: {exc}", file=sys.stderr)
        return 1
    copied = ", ".join(f"{n} {table}" for table, n in counts.items())
    print(f"Copied {copied} from {config.db_path} to {redact_url(url)}.")
    print("Now set store.url to it in config.yaml and restart Perch.")
    return 0


async def _migrate(path: Any, url: str) -> dict[str, int]:
    source = await open_store(path)
    try:
        try:
            await source.hold_instance()
        except AlreadyRunning:
            raise CopyRefused(f"Perch is running with {path}; stop it before migrating") from None
        target = await open_store(url)
        try:
            return await copy_store(source, target)
        finally:
            await target.close()
    finally:
        await source.close()


def _backup(config: Config, to: str | None) -> int:
    where = config.store_target
    target = (
        Path(to).expanduser() if to else default_target(config.db_path.parent / "backups", where)
    )
    try:
        written = back_up(where, target.absolute())
    except BackupFailed as exc:
        print(f"perch: {exc}", file=sys.stderr)
        return 1
    shown = redact_url(where) if isinstance(where, str) else where
    print(f"Backed up {shown} to {written}.")
    if is_postgres_url(where):
        print(f"Restore it into an empty database with: pg_restore --no-owner -d URL {written}")
    else:
        print("Restore it by stopping Perch and putting it in place of store.path.")
    return 0
