"""Store backends for tests: SQLite files, and a throwaway PostgreSQL server for the session.

`postgres_server` (session scope) runs the machine's own PostgreSQL binaries (`initdb`,
`pg_ctl`) in a temp dir on 127.0.0.1 and a free port, as an unprivileged user when the tests
run as root (PostgreSQL refuses root), and stops it at the end. Without the binaries the
PostgreSQL cases are skipped with a reason saying so. `backend` gives a test a fresh, empty
store of each kind: a new SQLite file, or a new database on that server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.store.open import open_store
from bot.store.roles import Store

BACKENDS = ("sqlite", "postgresql")
NO_POSTGRES = "no PostgreSQL server binaries (initdb, pg_ctl) on this machine"


@dataclass(frozen=True, slots=True)
class PostgresServer:
    host: str
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}:{self.port}/{database}"


@dataclass(slots=True)
class Backend:
    """One backend kind at a fresh location; `open_other()` opens a second, empty one."""

    kind: str
    where: Path | str
    server: PostgresServer | None = None
    others: list[str] = field(default_factory=list)

    async def open(self) -> Store:
        return await open_store(self.where)

    async def open_other(self) -> Store:
        if self.server is None:
            assert isinstance(self.where, Path)
            return await open_store(self.where.with_name(f"other{len(self.others)}.db"))
        url = await new_database(self.server)
        self.others.append(url)
        return await open_store(url)


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    subprocess.run(["useradd", "--system", "--no-create-home", "postgres"], check=True)
    return "postgres"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer | None]:
    """A PostgreSQL server for this test session only; None without the binaries."""
    with throwaway_postgres() as server:
        yield server


@pytest.fixture
async def pg_url(postgres_server: PostgresServer | None) -> AsyncIterator[str]:
    """A fresh database on the session's server, dropped after the test; skips without one."""
    if postgres_server is None:
        pytest.skip(NO_POSTGRES)
    url = await new_database(postgres_server)
    try:
        yield url
    finally:
        await drop_database(postgres_server, url)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[PostgresServer | None]:
    """A PostgreSQL server in a temp dir until the block ends; None without the binaries
    (the benchmarks use it too)."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="perch-pg-"))
    data = root / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = _unprivileged_user()
        record = pwd.getpwnam(user)
        os.chown(root, record.pw_uid, record.pw_gid)
        root.chmod(0o700)
        prefix = ["runuser", "-u", user, "--"]
    port = _free_port()

    def run(*argv: str) -> None:
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options,
        "-w", "start")  # fmt: skip
    try:
        yield PostgresServer("127.0.0.1", port)
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


async def new_database(server: PostgresServer) -> str:
    """A fresh, empty database on `server`; its URL."""
    import asyncpg

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server.url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    return server.url(name)


async def drop_database(server: PostgresServer, url: str) -> None:
    import asyncpg

    name = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(server.url())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(params=BACKENDS)
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_server: PostgresServer | None
) -> AsyncIterator[Backend]:
    """A fresh, empty store location of each backend kind."""
    if request.param == "sqlite":
        yield Backend("sqlite", tmp_path / "data" / "perch.db")
        return
    if postgres_server is None:
        pytest.skip(NO_POSTGRES)
    url = await new_database(postgres_server)
    made = Backend("postgresql", url, postgres_server)
    try:
        yield made
    finally:
        for each in (url, *made.others):
            await drop_database(postgres_server, each)
