"""config.yaml: interpolation, validation and the one-line errors people see."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.config.agent import parse_duration
from bot.config.errors import EXIT_CONFIG, ConfigError
from bot.config.load import interpolate, load_config, require_api_key
from bot.config.schema import HeartbeatTarget

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "config.yaml"  # the tracked default; perch init copies it elsewhere
ENV = {"ANTHROPIC_API_KEY": "sk-ant-test"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_shipped_config_loads_with_console_on_and_platforms_off() -> None:
    config = load_config(SHIPPED, ENV)
    assert config.channels.console.enabled
    assert not config.channels.telegram.enabled
    assert not config.channels.slack.enabled
    assert not config.channels.signal.enabled
    assert config.agent.max_iterations == 20
    assert config.agent.queue.mode == "collect" and config.agent.queue.cap == 20
    assert config.agent.guard.max_message_chars == 32768
    assert config.heartbeat.every == 1800
    assert config.gateway.recovery_window == 900
    assert config.providers.anthropic.base_url == "https://api.anthropic.com"
    assert config.workspace == (SHIPPED.parent / "workspace").resolve()  # beside the file


def test_shipped_config_names_every_contract_key() -> None:
    text = (SHIPPED).read_text()
    for key in (
        "id:",
        "model:",
        "workspace:",
        "max_iterations:",
        "max_concurrent_runs:",
        "max_spawn_depth:",
        "queue:",
        "guard:",
        "api_key:",
        "base_url:",
        "store:",
        "heartbeat:",
        "console:",
        "telegram:",
        "token:",
        "dm_policy:",
        "allow_from:",
        "group_policy:",
        "groups:",
        "require_mention:",
        "slack:",
        "bot_token:",
        "app_token:",
        "signal:",
        "number:",
        "service_url:",
    ):
        assert key in text, key


def test_env_interpolation_with_defaults() -> None:
    env = {"A": "1", "EMPTY": ""}
    tree = {"x": "${A}", "y": "${B:-two}", "z": ["${EMPTY:-fallback}", "pre-${A}-post"], "n": 3}
    assert interpolate(tree, env) == {"x": "1", "y": "two", "z": ["fallback", "pre-1-post"], "n": 3}


def test_missing_variable_names_the_key_and_the_variable() -> None:
    with pytest.raises(ConfigError) as err:
        interpolate({"channels": {"slack": {"bot_token": "${SLACK_X}"}}}, {})
    assert "channels.slack.bot_token" in str(err.value)
    assert "SLACK_X" in str(err.value)


def test_missing_api_key_says_how_to_set_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(SHIPPED, {})
    message = str(err.value)
    assert "providers.anthropic.api_key" in message
    assert "export ANTHROPIC_API_KEY=" in message


def test_empty_api_key_is_refused_at_start(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "providers: {anthropic: {api_key: ''}}\n"), {})
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        require_api_key(config)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "agent: {max_iterations: lots}\n",
            "agent.max_iterations: Input should be a valid integer",
        ),
        ("agent: {queue: {mode: shout}}\n", "agent.queue.mode: Input should be"),
        ("agent: {modle: x}\n", "agent.modle: unknown key"),
        ("heartbeat: {every: soon}\n", "heartbeat.every: expected a duration"),
        ("heartbeat: {active_hours: '9-5'}\n", "heartbeat.active_hours: expected HH:MM-HH:MM"),
        ("agent: {timezone: Mars/Base}\n", "agent.timezone: unknown timezone"),
        ("agent: [1, 2]\n", "agent: Input should be a valid dictionary"),
        ("agent: {max_spawn_depth: 9}\n", "agent.max_spawn_depth: Input should be less than"),
        (
            "channels: {telegram: {enabled: true, token: t, dm_policy: allowlist}}\n",
            "dm_policy is allowlist but allow_from is empty",
        ),
        (
            "channels: {telegram: {enabled: true, token: t, dm_policy: open}}\n",
            'allow_from: ["*"]',
        ),
        ("channels: {telegram: {enabled: true}}\n", "TELEGRAM_BOT_TOKEN"),
        ("channels: {slack: {enabled: true, bot_token: x}}\n", "SLACK_APP_TOKEN"),
        ("agent: {id: 'a b'}\n", "agent.id: String should match pattern"),
        ("agent: {model: x\n", "not valid YAML at line"),
        ("- just\n- a list\n", "top level must be a mapping"),
    ],
)
def test_bad_config_gives_one_readable_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), ENV)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message
    assert str(tmp_path / "config.yaml") in message


def test_allowlist_with_ids_and_numbers_is_accepted(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            "channels: {telegram: {enabled: true, token: '1:t', dm_policy: allowlist, "
            "allow_from: [12345, '678']}}\n",
        ),
        ENV,
    )
    assert config.channels.telegram.allow_from == ["12345", "678"]


def test_missing_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml", ENV)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("10m", 600), ("2h", 7200), ("1d", 86400), ("0", 0), (0, 0), ("250ms", 0.25)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", [90, "30", 1.5, " 45 "])
def test_a_bare_number_is_not_a_duration(text: object) -> None:
    with pytest.raises(ValueError, match=r"needs a unit: write .*s, .*m or .*h \(0 means off\)"):
        parse_duration(text)


def test_bare_every_in_the_config_is_an_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"heartbeat\.every: a duration needs a unit"):
        load_config(write(tmp_path, "heartbeat: {every: 30}\n"), ENV)


@given(st.text())
def test_duration_parser_never_crashes_on_garbage(text: str) -> None:
    with contextlib.suppress(ValueError):
        assert parse_duration(text) >= 0


def test_perch_run_with_broken_config_exits_78_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "agent: {max_iterations: -1}\n")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_CONFIG
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "agent.max_iterations" in lines[0]


def test_perch_run_without_api_key_exits_78(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", str(SHIPPED)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == EXIT_CONFIG
    assert "ANTHROPIC_API_KEY" in proc.stderr


def _perch_run(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"agent:\n  model: caf\xe9\n", "not UTF-8 text (byte 0xe9 on line 2)"),
        (b"\xff\xfea\x00:\x00", "not UTF-8 text (byte 0xff on line 1)"),
        # Short ids: pytest before 9.2 puts the whole bytes into the test id, and so into
        # PYTEST_CURRENT_TEST, which the `perch run` child inherits (E2BIG).
        pytest.param(
            b"agent: " + b"[" * 5000 + b"]" * 5000 + b"\n",
            "nested more than 32 levels deep",
            id="5000-deep-flow-list",
        ),
        pytest.param(
            "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(3000)).encode(),
            "nested more than 32 levels deep",
            id="3000-deep-block-map",
        ),
        pytest.param(
            b"agent: " + b"{a: " * 40 + b"1" + b"}" * 40 + b"\n",
            "nested more than 32 levels deep",
            id="40-deep-flow-map",
        ),
    ],
)
def test_unreadable_or_absurdly_nested_file_exits_78_with_one_line(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_config(path, ENV)
    proc = _perch_run(path, tmp_path)
    assert proc.returncode == EXIT_CONFIG
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert expected in lines[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "agent: {exec: {timeout_s: 900, max_timeout_s: 600}}\n",
            "agent.exec: timeout_s (900) is above max_timeout_s (600); lower timeout_s or "
            "raise max_timeout_s",
        ),
        (
            "heartbeat: {target: ownr}\n",
            "heartbeat.target: must be owner, last, none, or {channel: <channel>, "
            "to: <chat id>}, got 'ownr'",
        ),
        ("heartbeat: {target: 5}\n", "heartbeat.target: must be owner, last, none"),
        ("heartbeat: {target: {channel: telegram}}\n", "the target mapping lacks to"),
        ("heartbeat: {target: {channel: x, to: y, via: z}}\n", "the target mapping has via"),
    ],
)
def test_cross_field_and_union_errors_read_in_the_users_terms(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), ENV)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message
    assert "literal[" not in message and "HeartbeatTarget" not in message
    assert message.count("; heartbeat.target") == 0  # one error per key, not one per member


def test_heartbeat_target_mapping_with_a_numeric_chat_id_is_accepted(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "heartbeat: {target: {channel: telegram, to: 42}}\n"), ENV)
    assert config.heartbeat.target == HeartbeatTarget(channel="telegram", to="42")


@pytest.mark.parametrize(
    "text",
    [
        "agent: {timezone: Mars/Base}\n",
        "heartbeat: {active_hours: '9-5'}\n",
        "heartbeat: {target: ownr}\n",
        "agent: {max_iterations: lots}\n",
    ],
)
def test_error_lines_quote_the_bad_value_once(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), ENV)
    message = str(err.value)
    for value in ("Mars/Base", "9-5", "ownr", "lots"):
        assert message.count(value) <= 1, message


def test_the_daemon_runs_on_uvloop_unless_the_config_asks_for_asyncio(tmp_path: Path) -> None:
    import uvloop

    from bot.operator.cli import event_loop_factory

    path = tmp_path / "config.yaml"
    path.write_text("gateway: {event_loop: asyncio}\n")
    assert load_config(path, ENV).gateway.event_loop == "asyncio"
    assert event_loop_factory("asyncio") is None  # asyncio.Runner's own loop
    path.write_text("agent: {id: main}\n")
    default = load_config(path, ENV).gateway.event_loop
    factory = event_loop_factory(default)
    assert factory is not None
    loop = factory()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    path.write_text("gateway: {event_loop: trio}\n")
    with pytest.raises(ConfigError, match=r"gateway\.event_loop"):
        load_config(path, ENV)
