"""The channel registry seam: plug-ins enabled by config key, their options validated when the
config loads, and a daemon whose start-up fails closing everything it had opened."""

from __future__ import annotations

import fcntl
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from bot.config.errors import EXIT_CONFIG, ConfigError
from bot.config.load import load_config
from bot.config.paths import status_path
from bot.daemon import AlreadyRunning, Daemon, StartupError
from bot.operator.cli import main
from bot.store.sqlite.thread import THREAD_NAME
from channels import registry
from channels.plugin import ChannelContext
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel, memory_plugin
from tests.harness import make_config
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]
OPEN = {"enabled": True, "dm_policy": "open", "allow_from": ["*"]}


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


@pytest.fixture
def plugins() -> Iterator[list[str]]:
    """Register the memory plug-in under the keys a test appends; forget them afterwards."""
    keys: list[str] = []
    yield keys
    for key in keys:
        registry.unregister(key)


def use(plugins: list[str], key: str) -> None:
    registry.register(memory_plugin(key))
    plugins.append(key)


async def test_a_registered_plugin_is_built_from_its_config_key(
    tmp_path: Path, fake: FakeAnthropic, plugins: list[str]
) -> None:
    use(plugins, "memory")
    config = make_config(tmp_path, fake.base_url, {"channels.memory": {**OPEN, "account": "A1"}})
    daemon = Daemon(config)
    await daemon.start()
    try:
        channel = daemon.channels["memory"]
        assert isinstance(channel, MemoryChannel)
        assert channel.account == "A1"
        await channel.say("hello there")
        assert await channel.wait_sent(1, timeout=20) == ["echo: hello there"]
        assert "You are in memory." in str(fake.requests[0]["system"])
    finally:
        await daemon.stop()
    assert not channel.status().up


def test_plugins_come_in_registry_order_and_a_registered_one_follows() -> None:
    registry.register(memory_plugin("zz_extra"))
    try:
        assert registry.names()[-1] == "zz_extra"
        assert registry.in_registry_order(["zz_extra", "console", "telegram"]) == [
            "telegram",
            "console",
            "zz_extra",
        ]
    finally:
        registry.unregister("zz_extra")
    assert "zz_extra" not in registry.names()


def test_the_builtin_plugins_load_in_registry_order_by_module_name() -> None:
    assert [p.key for p in registry.builtin()] == [
        "telegram",
        "slack",
        "signal",
        "discord",
        "whatsapp",
        "matrix",
        "email",
        "console",
    ]
    assert registry.names()[: len(registry.BUILTIN)] == (
        "telegram",
        "slack",
        "signal",
        "discord",
        "whatsapp",
        "matrix",
        "email",
        "console",
    )


def test_a_plugin_module_that_is_not_installed_is_skipped_with_a_debug_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="channels.registry"):
        loaded = registry.load_plugins(["channels.gone.plugin", "channels.console"])
    assert [p.key for p in loaded] == ["console"]
    assert "channels.gone.plugin is not installed; skipped" in caplog.text


def test_a_plugin_whose_own_import_fails_is_an_error_not_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "perch_broken_plugin.py").write_text("import perch_no_such_library\n")
    (tmp_path / "perch_not_a_plugin.py").write_text("PLUGIN = 'telegram'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="perch_no_such_library"):
        registry.load_plugins(["perch_broken_plugin"])
    with pytest.raises(TypeError, match=r"perch_not_a_plugin.PLUGIN must be a ChannelPlugin"):
        registry.load_plugins(["perch_not_a_plugin"])


def test_a_bad_option_fails_when_the_config_loads_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"channels": {"telegram": {"enabled": True, "token": "abc"}}}))
    with pytest.raises(ConfigError) as err:
        load_config(path, {})
    message = str(err.value)
    assert "\n" not in message
    assert "channels.telegram.token does not look like a bot token" in message


def test_a_registered_plugins_options_are_checked_too(tmp_path: Path, plugins: list[str]) -> None:
    use(plugins, "memory")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"channels": {"memory": {"enabled": True, "colour": "red"}}}))
    with pytest.raises(ConfigError, match=r"channels\.memory\.colour: unknown key"):
        load_config(path, {})


def test_doctor_and_run_report_a_bad_option_in_one_line_with_exit_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    bad = {"enabled": True, "bot_token": "xapp-1-abc", "app_token": "xapp-1-abc"}
    path.write_text(yaml.safe_dump({"channels": {"slack": bad}}))
    assert main(["doctor", "--config", str(path)]) == EXIT_CONFIG
    out = capsys.readouterr().out.strip()
    assert out.startswith("FAIL  config:") and "channels.slack.bot_token" in out
    assert len(out.splitlines()) == 1
    assert main(["run", "--config", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err.strip()
    assert "channels.slack.bot_token holds an app-level token" in err
    assert len(err.splitlines()) == 1


def test_secrets_come_from_the_plugins_secret_fields(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    slack = {"bot_token": "xoxb-secret-1", "app_token": "xapp-secret-2", "signing_secret": ""}
    path.write_text(yaml.safe_dump({"channels": {"slack": slack, "telegram": {"token": "1:t"}}}))
    found = registry.secrets(load_config(path, {}).channels)
    assert sorted(found) == ["1:t", "xapp-secret-2", "xoxb-secret-1"]


def test_the_console_stops_the_daemon_at_eof_only_when_alone() -> None:
    from channels.console import ConsoleChannel, ConsoleOptions

    stopped: list[bool] = []
    alone = registry.get("console")
    assert alone is not None
    options = ConsoleOptions()
    channel = alone.create(options, ChannelContext(lambda: stopped.append(True), ()))
    assert isinstance(channel, ConsoleChannel)
    assert channel.account == "local"
    assert registry.capabilities("telegram").length_unit == "utf16"
    assert registry.capabilities("nonesuch").chat_hint == ""


# -- start-up that fails closes what it opened ------------------------------------------------


def _database_threads() -> int:
    return sum(t.name == THREAD_NAME for t in threading.enumerate())


def _lock_is_free(db_path: Path) -> bool:
    """The SQLite store's instance lock (`<db>.lock`, see bot/store_sqlite.py) is not held."""
    with open(db_path.with_name(db_path.name + ".lock"), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises if a daemon holds it
    return True


async def test_a_channel_whose_start_raises_leaves_nothing_open(
    tmp_path: Path, fake: FakeAnthropic, plugins: list[str]
) -> None:
    use(plugins, "memory")
    use(plugins, "broken")
    threads = _database_threads()
    overrides = {"channels.memory": OPEN, "channels.broken": {**OPEN, "broken": True}}
    config = make_config(tmp_path, fake.base_url, overrides)
    daemon = Daemon(config)
    with pytest.raises(StartupError) as err:
        await daemon.start()
    assert str(err.value) == ("starting channel broken failed: the adapter blew up while starting")
    assert not daemon.channels["memory"].status().up  # started, then stopped again
    assert not daemon.channels["broken"].status().up  # half-started, stopped too
    assert _lock_is_free(config.db_path)
    await eventually(lambda: _database_threads() <= threads)  # the database thread ended


async def test_a_store_that_cannot_open_releases_the_lock(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    (tmp_path / "data" / "perch.db").mkdir(parents=True)  # a folder where the file should be
    config = make_config(tmp_path, fake.base_url)
    threads = _database_threads()
    with pytest.raises(StartupError, match=r"^opening the store .*perch\.db failed: "):
        await Daemon(config).start()
    assert _lock_is_free(config.db_path)
    await eventually(lambda: _database_threads() <= threads)


def test_perch_run_says_in_one_line_why_it_could_not_start(tmp_path: Path) -> None:
    (tmp_path / "data" / "perch.db").mkdir(parents=True)
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "providers": {"anthropic": {"api_key": "sk-ant-test-1234567890"}},
                "channels": {"console": {"enabled": False}},
                "heartbeat": {"every": 0},
            }
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("perch: opening the store ") and "failed" in last
    assert "Traceback" not in done.stderr


async def test_a_second_daemon_on_the_same_store_leaves_the_first_ones_files_alone(
    tmp_path: Path, fake: FakeAnthropic
) -> None:
    config = make_config(tmp_path, fake.base_url)
    first = Daemon(config)
    await first.start()
    try:
        first.write_status()
        with pytest.raises(AlreadyRunning, match="another Perch is already running"):
            await Daemon(config).start()
        assert status_path(config).exists()  # still the running daemon's
    finally:
        await first.stop()
    assert not status_path(config).exists()


def test_the_daemon_names_no_platform() -> None:
    """Everything platform-specific sits behind the registry; `bot/` asks it by key."""
    keys = [p.key for p in registry.builtin() if p.key != "console"]
    pattern = re.compile(r"\b(" + "|".join(keys) + r")\b", re.IGNORECASE)
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in sorted((REPO / "bot").glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and line.strip() != "import signal as signals"  # the stdlib
    ]
    assert found == []
