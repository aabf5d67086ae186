"""The control socket and the CLI commands that use it, with the daemon running and without.

The daemon runs in-process (`tests/harness.py`) and the CLI is called as `perch ...` would
be (`bot.operator.cli.main` in a thread), so every request crosses the real Unix socket.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bot.config.paths import socket_path
from bot.operator.cli import main
from bot.operator.control_client import call
from bot.operator.reply import Reply as ControlReply
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon
from tests.unprivileged import run_unprivileged


async def perch(*args: str) -> int:
    return await asyncio.to_thread(main, list(args))


async def test_socket_is_private_and_answers_one_json_line(tmp_path: Path) -> None:
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": MemoryChannel("telegram")}) as daemon,
    ):
        path = socket_path(daemon.config)
        assert path.parent == daemon.config.db_path.parent
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"op": "status", "args": {}}\n')
        answer = json.loads(await reader.readline())
        writer.close()
        assert answer["code"] == 0 and "Perch is running" in answer["out"]
        bad = await call(path, "no.such.op", {})
        assert bad is not None and bad.code == 2 and "unknown control operation" in bad.err
    assert not path.exists()  # removed on shutdown
    assert await call(path, "status", {}) is None


async def test_stale_socket_left_by_a_crash_means_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}) as daemon:
        config = str(daemon.config.source)
        path = socket_path(daemon.config)
    import socket

    with socket.socket(socket.AF_UNIX) as dead:  # bound, never listening: a crashed daemon
        dead.bind(str(path))
        assert await perch("status", "--config", config) == 0
    assert capsys.readouterr().out.startswith("Perch is not running.")


async def test_pairing_through_the_daemon_is_live_and_reaches_the_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.allow_from": ["owner1"]}
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as daemon,
    ):
        config = str(daemon.config.source)
        await chan.say("hello?", chat_id="stranger")
        await chan.wait_sent(2)
        code = chan.texts("stranger")[0].split("\n\n")[1]
        notice = chan.texts("owner1")
        assert notice and f"perch pairing approve telegram {code}" in notice[0]
        assert "stranger" in notice[0]

        assert await perch("pairing", "list", "--config", config) == 0
        assert code in capsys.readouterr().out
        assert await perch("pairing", "approve", "telegram", code, "--config", config) == 0
        assert "Approved stranger on telegram." in capsys.readouterr().out
        await chan.say("now?", chat_id="stranger")
        assert (await chan.wait_sent(3, timeout=30))[-1] == "echo: now?"  # live at once

        assert await perch("pairing", "list", "--approved", "--config", config) == 0
        assert "telegram  stranger  approved" in capsys.readouterr().out
        assert await perch("pairing", "revoke", "telegram", "stranger", "--config", config) == 0
        assert "Revoked stranger on telegram" in capsys.readouterr().out
        await chan.say("still there?", chat_id="stranger")
        texts = await chan.wait_sent(4, timeout=30)
        assert "pairing code" in texts[-1]  # back to pairing, no model call
        assert await perch("pairing", "revoke", "telegram", "stranger", "--config", config) == 1
        assert "not an approved sender" in capsys.readouterr().err


async def test_pairing_revoke_and_approved_list_work_without_the_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {"telegram": chan}) as d:
        config = str(d.config.source)
        await chan.say("hi", chat_id="u9")
        code = (await chan.wait_sent(1))[0].split("\n\n")[1]
    assert await perch("pairing", "approve", "telegram", code, "--config", config) == 0
    assert await perch("pairing", "list", "telegram", "--approved", "--config", config) == 0
    assert "u9" in capsys.readouterr().out
    assert await perch("pairing", "revoke", "telegram", "u9", "--config", config) == 0
    assert await perch("pairing", "list", "--approved", "--config", config) == 0
    assert "No approved senders." in capsys.readouterr().out


async def test_chat_runs_one_turn_through_the_daemon(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}) as daemon:
        config = str(daemon.config.source)
        fake.queue(Reply.text("Hello from the daemon. NO_REPLY"))
        assert await perch("chat", "-m", "hi there", "--config", config) == 0
        assert capsys.readouterr().out == "Hello from the daemon.\n"
        assert last_user_text(fake.requests[-1]) == "hi there"  # a user turn, not a system one
        key = "agent:main:telegram:bot:dm:u1"
        assert await perch("chat", "-m", "second", "--session", key, "--config", config) == 0
        assert capsys.readouterr().out == "echo: second\n"
        assert await perch("chat", "-m", "x", "--session", "nonsense", "--config", config) == 2
        assert "--session" in capsys.readouterr().err
        fake.queue(Reply.text("NO_REPLY"), Reply.text(""))
        assert await perch("chat", "-m", "quiet?", "--config", config) == 0
        assert capsys.readouterr() == ("", "")  # a chosen silence
        assert await perch("chat", "-m", "empty?", "--config", config) == 0
        said = capsys.readouterr()
        assert said.out == "" and said.err == "perch chat: the model sent back an empty answer\n"
        assert await perch("sessions", "--config", config) == 0
        listing = capsys.readouterr().out
    assert "agent:main:cli:local:dm:owner" in listing and key in listing


async def test_a_control_request_with_a_lone_surrogate_is_answered(tmp_path: Path) -> None:
    # JSON allows "\ud800"; a script may send it. It becomes U+FFFD, and the turn is saved;
    # the NUL is the input guard's to report and take out, as in a chat message.
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}) as daemon:
        path = socket_path(daemon.config)
        reader, writer = await asyncio.open_unix_connection(str(path))
        writer.write(b'{"op": "chat", "args": {"text": "hi \\ud800\\u0000 there"}}\n')
        answer = json.loads(await reader.readline())
        writer.close()
        assert answer["code"] == 0 and answer["out"] == "echo: hi \ufffd there\n"  # NUL: guard
        assert daemon.store is not None
        (session,) = await daemon.store.list_sessions()
        assert len(await daemon.store.messages(session.id)) == 2


async def test_chat_without_a_daemon_runs_in_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with FakeAnthropic(api_key="sk-ant-local") as fake:  # refuses any other key
        config = tmp_path / "config.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "providers": {
                        "anthropic": {"api_key": "${ANTHROPIC_API_KEY}", "base_url": fake.base_url}
                    },
                    "channels": {"telegram": {"enabled": True, "token": "${TELEGRAM_TOKEN}"}},
                    "heartbeat": {"every": 0},
                }
            )
        )
        monkeypatch.delenv("TELEGRAM_TOKEN", raising=False)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
        assert await perch("chat", "-m", "hi", "--config", str(config)) == 78
        assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-local")
        assert await perch("chat", "-m", "standalone?", "--config", str(config)) == 0
        assert capsys.readouterr().out == "echo: standalone?\n"


async def test_send_delivers_through_the_daemon_and_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.allow_from": ["owner1"]}
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as d,
    ):
        config = str(d.config.source)
        assert (
            await perch("send", "--to", "telegram:4242", "Backup", "done.", "--config", config) == 0
        )
        assert "Sent to telegram:4242." in capsys.readouterr().out
        assert await perch("send", "--to", "owner", "hi boss", "--config", config) == 0
        assert await perch("send", "--to", "fax:1", "x", "--config", config) == 2
        assert "unknown or disabled channel 'fax'" in capsys.readouterr().err
    assert [(s.chat.chat_id, s.text) for s in chan.sent] == [
        ("4242", "Backup done."),
        ("owner1", "hi boss"),
    ]
    assert not fake.requests  # no model call
    assert await perch("send", "--to", "telegram:4242", "x", "--config", config) == 1
    assert "Perch is not running" in capsys.readouterr().err


async def test_sessions_all_shows_archived_conversations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chan = MemoryChannel("telegram")
    overrides = {"channels.telegram.dm_policy": "open", "channels.telegram.allow_from": ["*"]}
    async with (
        FakeAnthropic() as fake,
        running_daemon(tmp_path, fake, {"telegram": chan}, overrides) as d,
    ):
        config = str(d.config.source)
        await chan.say("hi")
        await chan.wait_sent(1, timeout=30)
        await chan.say("/new")
        await chan.wait_sent(2)
        assert await perch("sessions", "--config", config) == 0
        assert "No conversations yet." in capsys.readouterr().out
        assert await perch("sessions", "--all", "--config", config) == 0
        out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["UPDATED", "COST", "SESSION"]
    assert "agent:main:telegram:bot:dm:u1  (archived)" in out


def test_commands_other_than_run_need_no_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "SLACK_BOT", "SLACK_APP"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        "providers: {anthropic: {api_key: '${ANTHROPIC_API_KEY}', base_url: 'http://127.0.0.1:9'}}\n"
        "channels:\n  console: {enabled: false}\n"
        "  slack: {enabled: true, bot_token: '${SLACK_BOT}', app_token: '${SLACK_APP}'}\n"
    )
    c = str(config)
    assert main(["init", "--config", c]) == 0
    assert main(["status", "--config", c]) == 0
    out = capsys.readouterr().out
    assert "Perch is not running" in out
    assert main(["status", "--config", c]) == 0
    note = "note: providers.anthropic.api_key uses ${ANTHROPIC_API_KEY}, which is not set"
    assert note in capsys.readouterr().out
    assert main(["sessions", "--config", c]) == 0
    assert main(["pairing", "list", "--config", c]) == 0
    assert main(["cron", "list", "--config", c]) == 0
    capsys.readouterr()
    assert main(["doctor", "--config", c]) == 1
    doctor = capsys.readouterr().out
    assert "FAIL  secret: channels.slack.bot_token uses ${SLACK_BOT}, which is not set" in doctor
    assert "FAIL  secret: providers.anthropic.api_key uses ${ANTHROPIC_API_KEY}" in doctor
    assert main(["run", "--config", c]) == 78
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("perch 0.")


async def test_status_shows_the_socket_daemon_even_if_status_json_is_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {}) as daemon:
        daemon.config.db_path.with_name("status.json").unlink(missing_ok=True)
        assert await perch("status", "--config", str(daemon.config.source)) == 0
        out = capsys.readouterr().out
    assert f"pid {os.getpid()}" in out and "budget: off" in out


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_json_answer_becomes_a_reply(data: object) -> None:
    reply = ControlReply.from_json(data)
    assert isinstance(reply.code, int) and isinstance(reply.out, str)
    if not isinstance(data, dict) or not isinstance(data.get("code", 1), int):
        assert reply.code == 1 and "cannot read" in reply.err


def test_an_unreadable_credential_file_does_not_stop_pairing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(
        "providers: {anthropic: {api_key: '${cred:anthropic_key}'}}\n"
        f"channels: {{telegram: {{enabled: true, token: '${{file:{tmp_path}/root-only}}'}}}}\n"
    )
    assert main(["pairing", "list", "--config", str(config)]) == 0
    assert "No pending pairing requests." in capsys.readouterr().out
    assert main(["doctor", "--config", str(config)]) == 1
    doctor = capsys.readouterr().out
    assert "FAIL  secret: providers.anthropic.api_key: ${cred:anthropic_key} needs" in doctor
    assert f"FAIL  secret: channels.telegram.token: cannot read secret file {tmp_path}" in doctor
    assert main(["run", "--config", str(config)]) == 78


def test_a_channel_whose_token_is_unset_is_off_for_other_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TELEGRAM_TOKEN", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("channels: {telegram: {enabled: true, token: '${TELEGRAM_TOKEN}'}}\n")
    assert main(["status", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "channels.telegram.token uses ${TELEGRAM_TOKEN}, which is not set" in out
    assert "channels.telegram is treated as disabled here" in out
    assert main(["run", "--config", str(config)]) == 78  # the daemon still needs it
    assert "TELEGRAM_TOKEN is not set" in capsys.readouterr().err


_KNOCK = """
import socket, sys
with socket.socket(socket.AF_UNIX) as sock:
    sock.connect(sys.argv[1])
    sock.sendall(b'{"op": "status", "args": {}}\\n')
    print(sock.makefile().readline())
"""


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user may traverse (pytest's tmp dirs are root-only)."""
    path = Path(tempfile.mkdtemp(prefix="perch-peer-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _widen(path: Path) -> None:
    path.parent.chmod(0o755)
    path.chmod(0o666)


async def test_the_socket_answers_only_the_daemons_user_whatever_its_mode(
    open_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another user reaching the socket (a mode widened by hand) is refused by its uid."""
    if os.geteuid() != 0:
        pytest.skip("connecting as another user needs root")
    store = {"store.path": f"{open_dir}/data/perch.db"}
    async with FakeAnthropic() as fake, running_daemon(open_dir, fake, {}, store) as daemon:
        path = socket_path(daemon.config)
        await asyncio.to_thread(_widen, path)
        done = await asyncio.to_thread(run_unprivileged, _KNOCK, str(path), imports=())
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        mine = await call(path, "status", {})
    assert answer["code"] == 2 and "not yours" in answer["err"], done.stdout + done.stderr
    assert "Perch is running" not in answer["out"]
    assert mine is not None and mine.code == 0  # the daemon's own user still is
    assert any("refused a connection from uid 65534" in r.getMessage() for r in caplog.records)
