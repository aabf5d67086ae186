"""Upgrades that lose nothing, on both backends: a database of an older schema is migrated
at start with what it held kept (SQLite keeps a copy of the file as it was), instances that
start together on one PostgreSQL migrate it once, a database a newer Perch upgraded is
refused with a clear line (`perch run` exits 78: systemd must not retry), and
`perch store backup` writes a copy that opens as the store it came from."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from agents.model import Usage
from bot.operator.cli import main
from bot.store.backup import pg_dump_program
from bot.store.open import open_store
from bot.store.rows import SchemaTooNew
from bot.store.sqlite.base import MIGRATIONS as SQLITE_MIGRATIONS
from bot.store.sqlite.base import statements
from tests.mcp_servers.running import REPO
from tests.store_backends import Backend, drop_database, new_database

USER: list[dict[str, object]] = [{"type": "text", "text": "remember the blue door"}]


def old_sqlite(path: Path, version: int) -> None:
    """An SQLite file as a Perch of schema `version` left it, holding one message."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        for script in SQLITE_MIGRATIONS[:version]:
            for statement in statements(script):
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {version}")
        db.execute(
            "INSERT INTO sessions (id, key, created_at, updated_at) VALUES ('s1', 'k1', 0, 0)"
        )
        db.execute(
            "INSERT INTO messages (session_id, role, content, created_at) "
            """VALUES ('s1', 'user', '[{"type": "text", "text": "remember the blue door"}]', 0)"""
        )


async def test_an_older_sqlite_file_is_migrated_keeping_its_messages_and_a_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "data" / "perch.db"
    old = len(SQLITE_MIGRATIONS) - 1
    old_sqlite(path, old)
    store = await open_store(path)
    try:
        assert await store.schema_version() == store.latest_schema
        assert await store.messages("s1") == [{"role": "user", "content": USER}]
    finally:
        await store.close()
    kept = path.with_name(f"perch.db.schema{old}.bak")
    with sqlite3.connect(kept) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == old
        assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 1


async def test_a_database_a_newer_perch_upgraded_is_refused(backend: Backend) -> None:
    store = await backend.open()
    newer = store.latest_schema + 1
    await store.close()
    if backend.kind == "sqlite":
        with sqlite3.connect(backend.where) as db:
            db.execute(f"PRAGMA user_version = {newer}")
    else:
        conn = await asyncpg.connect(str(backend.where))
        try:
            await conn.execute("UPDATE perch_schema SET version = $1", newer)
        finally:
            await conn.close()
    with pytest.raises(SchemaTooNew, match=f"at schema {newer}, but this Perch knows"):
        await backend.open()


def test_perch_run_on_a_newer_database_says_so_and_exits_78(tmp_path: Path) -> None:
    path = tmp_path / "data" / "perch.db"
    old_sqlite(path, len(SQLITE_MIGRATIONS))
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(SQLITE_MIGRATIONS) + 1}")
    config = tmp_path / "config.yaml"
    config.write_text(
        "store: {path: ./data/perch.db}\nchannels: {console: {enabled: false}}\n"
        "heartbeat: {every: 0}\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", str(config)],
        capture_output=True, text=True, timeout=60, cwd=REPO, env=env,
    )  # fmt: skip
    assert proc.returncode == 78, proc.stderr
    assert "a newer Perch upgraded it" in proc.stderr and "Traceback" not in proc.stderr


async def test_instances_starting_together_migrate_postgresql_once(backend: Backend) -> None:
    if backend.kind != "postgresql":
        pytest.skip("one SQLite file serves one instance")
    stores = await asyncio.gather(*(backend.open() for _ in range(4)))
    try:
        for store in stores:
            assert await store.schema_version() == store.latest_schema
    finally:
        for store in stores:
            await store.close()


async def test_store_backup_writes_a_private_copy_that_opens_as_the_store(
    backend: Backend, tmp_path: Path
) -> None:
    if backend.kind == "postgresql" and pg_dump_program() is None:
        pytest.skip("no pg_dump on this machine (PostgreSQL's client programs)")
    store = await backend.open()
    try:
        session = await store.session("agent:main:telegram:bot:dm:1")
        await store.save_run(
            session.id, session.key, [{"role": "user", "content": USER}], usage=Usage()
        )
        config = tmp_path / "config.yaml"
        where = backend.where
        config.write_text(
            f"store: {{path: {where}}}\n"
            if backend.kind == "sqlite"
            else f"store: {{url: '{where}'}}\n"
        )
        copy = tmp_path / "copies" / "now.bak"
        # Taken while the store is open and in use, as from a running daemon.
        assert await asyncio.to_thread(main, ["store", "backup", "--config", str(config),
                                               "--to", str(copy)]) == 0  # fmt: skip
    finally:
        await store.close()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    if backend.kind == "sqlite":
        restored_at: Path | str = copy
    else:
        assert backend.server is not None
        restored_at = await new_database(backend.server)
        program = Path(str(pg_dump_program())).with_name("pg_restore")
        done = await asyncio.to_thread(
            subprocess.run,
            [str(program), "--no-owner", f"--dbname={restored_at}", str(copy)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    restored = await open_store(restored_at)
    try:
        found = await restored.find_session("agent:main:telegram:bot:dm:1")
        assert found is not None
        assert await restored.messages(found.id) == [{"role": "user", "content": USER}]
    finally:
        await restored.close()
        if isinstance(restored_at, str) and backend.server is not None:
            await drop_database(backend.server, restored_at)


def test_store_backup_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "data" / "perch.db"
    old_sqlite(path, len(SQLITE_MIGRATIONS))
    config = tmp_path / "config.yaml"
    config.write_text("store: {path: ./data/perch.db}\n")
    assert main(["store", "backup", "--config", str(config)]) == 0
    (written,) = (tmp_path / "data" / "backups").iterdir()
    assert written.name.startswith("perch-") and written.suffix == ".db"
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o700
    assert main(["store", "backup", "--config", str(config), "--to", str(written)]) == 1
    assert "already exists" in capsys.readouterr().err
