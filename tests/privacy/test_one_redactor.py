"""The one redactor (`bot/config/redact.py`): a URL's or a DSN's password, however written,
never reaches an output: the redactor itself (property-tested over passwords holding `/`,
`#`, `?`, `@`, `:` and every way of writing one in), `perch status` and `perch doctor` as
processes, and the log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from bot.config.redact import Redactor, scrub
from bot.store.urls import redact_url

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "p/ss#w0rd?x@y:z"

# Passwords as people pick them: letters and every character a URL treats specially.
PASSWORDS = st.text(
    st.sampled_from("abcdefghXYZ0123456789/#?@:!$%*+,;=~-._"), min_size=8, max_size=24
).filter(lambda p: sum(c.isalnum() for c in p) >= 4)


def spellings(password: str) -> list[str]:
    """Every way a password is written into a store URL, a DSN or an endpoint."""
    enc = quote(password, safe="")
    single = password.replace("\\", "\\\\").replace("'", "\\'")
    return [
        f"postgresql://perch:{password}@db.example:5432/perch",
        f"postgresql://perch:{enc}@db.example/perch?sslmode=require",
        f"postgres://:{password}@db.example/perch",
        f"postgresql://perch@db.example/perch?password={enc}",
        f"postgresql://perch@db.example/perch?sslmode=require&password={enc}",
        f"postgresql://perch@db.example/perch?sslpassword={enc}",
        f"host=db.example user=perch password={enc} dbname=perch",
        f"host=db.example user=perch password='{single} and more' dbname=perch",
        f"PGPASSWORD={enc} psql",
        f'{{"password": "{enc}"}}',
        f"http://otel:{password}@collector.example:4318/v1/traces",
        f"https://searx:{enc}@searx.example/search?q=weather",
    ]


@given(PASSWORDS, st.sampled_from(range(12)), st.text(max_size=20), st.text(max_size=20))
def test_no_spelling_of_a_password_survives_the_redactor(
    password: str, which: int, before: str, after: str
) -> None:
    shown = spellings(password)[which]
    text = scrub(f"{before} {shown} {after}")
    for form in {password, quote(password, safe="")}:
        assert form not in text.replace(before, "").replace(after, "")


@given(PASSWORDS)
def test_redact_url_hides_the_password_of_a_store_url(password: str) -> None:
    for spelled in spellings(password)[:6]:
        shown = redact_url(spelled)
        assert password not in shown and quote(password, safe="") not in shown
        assert shown.startswith(("postgresql://perch", "postgres://"))


def test_a_configured_secret_and_a_url_without_password_stay_as_they_are_otherwise() -> None:
    redact = Redactor(["pat_Zk81mQ3v9Lw"])
    assert redact("GITHUB_PAT is pat_Zk81mQ3v9Lw") == "GITHUB_PAT is [REDACTED]"
    plain = "http://127.0.0.1:8080/search?q=a and postgresql://perch@db/perch?sslmode=require"
    assert redact(plain) == plain
    # A raw `@` after the path cannot be told from a password's: masked rather than leaked.
    assert redact("http://h:8080/s?mail=a@b.example") == "http://h:***@b.example"


def perch(config: Path, *args: str) -> str:
    """`perch <args> --config config` as a process: what it printed (stdout and stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "bot.operator.cli", *args, "--config", str(config)],
        cwd=config.parent,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(REPO),
            "ANTHROPIC_API_KEY": "sk-ant-test-1234567890",
            "NO_PROXY": "127.0.0.1,localhost",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.stdout + done.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://perch:{PASSWORD}@127.0.0.1:9/perch",
        f"postgresql://perch@127.0.0.1:9/perch?password={quote(PASSWORD, safe='')}",
        f"host=127.0.0.1 port=9 user=perch password={quote(PASSWORD, safe='')} dbname=perch",
    ],
    ids=["userinfo", "query", "keywords"],
)
def test_status_and_doctor_never_print_the_store_password(tmp_path: Path, url: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "agent": {"workspace": "./workspace"},
                "store": {"url": url},
                "tracing": {"enabled": True, "endpoint": f"http://otel:{PASSWORD}@127.0.0.1:9"},
                "channels": {"console": {"enabled": False}},
            }
        )
    )
    printed = perch(config, "status") + perch(config, "doctor")
    assert "perch" in printed
    for form in (PASSWORD, quote(PASSWORD, safe=""), "p/ss"):
        assert form not in printed


async def test_a_search_url_password_in_a_tool_error_reaches_neither_model_nor_history(
    tmp_path: Path,
) -> None:
    from tests.chat_replay import ChatReplay
    from tests.fakes.anthropic import FakeAnthropic, Reply
    from tests.recall.test_recall import chat_messages, dm, say

    base = f"http://searx:{PASSWORD}@127.0.0.1:9/"  # nothing listens on port 9
    settings = {"agent.web_search": {"provider": "searxng", "base_url": base}}

    def answer(body: dict[str, object]) -> Reply:
        last = body["messages"][-1]["content"][0]  # type: ignore[index]
        if last.get("type") == "tool_result":
            return Reply.text("done")
        return Reply.tool_use([("web_search", {"query": "weather in Lisbon"})])

    async with FakeAnthropic() as fake:
        fake.default = answer
        async with ChatReplay(fake, tmp_path, settings) as chat:
            await say(chat, dm("4242"), "search it")
            stored = await chat_messages(chat, dm("4242"))
            assert chat.store is not None
            session = await chat.store.session("agent:main:telegram:default:dm:4242")
            history = str(await chat.store.messages(session.id))
        sent = [str(body) for body in fake.requests]
    result = sent[-1]
    assert "cannot reach" in result and "searx:***@127.0.0.1" in result
    for output in (*sent, *stored, history):
        for form in (PASSWORD, quote(PASSWORD, safe=""), "p/ss"):
            assert form not in output


async def test_status_of_a_running_daemon_never_prints_the_collectors_password(
    tmp_path: Path,
) -> None:
    import asyncio

    from tests.fakes.anthropic import FakeAnthropic
    from tests.harness import running_daemon

    endpoint = f"http://otel:{quote(PASSWORD, safe='')}@127.0.0.1:9/v1/traces"
    async with FakeAnthropic() as fake:
        settings = {"tracing.enabled": True, "tracing.endpoint": endpoint}
        async with running_daemon(tmp_path, fake, {}, settings) as daemon:
            assert daemon.config.source is not None
            printed = await asyncio.to_thread(perch, daemon.config.source, "status")
            printed += await asyncio.to_thread(perch, daemon.config.source, "status", "--json")
    assert "tracing: to http://otel:***@127.0.0.1:9/v1/traces" in printed, printed
    for form in (PASSWORD, quote(PASSWORD, safe="")):
        assert form not in printed
