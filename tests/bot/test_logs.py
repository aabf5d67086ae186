"""Logging: secrets never reach a log line, in text or JSON, message or traceback."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.process.logs import (
    REDACTED,
    JsonFormatter,
    RedactingFilter,
    Redactor,
    TextFormatter,
    run_id_var,
    setup_logging,
)

TELEGRAM_TOKEN = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"
SECRETS = ["sk-ant-api03-abcdefghijklmnop", "plain-config-secret-value"]


@pytest.fixture
def capture() -> Iterator[tuple[logging.Logger, io.StringIO, logging.Handler]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter(Redactor(SECRETS)))
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("test.redaction")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, stream, handler
    logger.removeHandler(handler)


@pytest.mark.parametrize(
    "leak",
    [
        f"GET https://api.telegram.org/bot{TELEGRAM_TOKEN}/getUpdates",
        "key is sk-ant-api03-abcdefghijklmnop here",
        "slack xoxb-1111-2222-abcdefghijkl and xapp-1-A0B1C2-33333-abcdef",
        "Authorization: Bearer abc.def.ghijklmnop",
        "config says plain-config-secret-value",
        "{'x-api-key': 'sk-zzzzzzzzzzzz'}",
    ],
)
def test_secrets_are_redacted_from_messages(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler], leak: str
) -> None:
    logger, stream, _ = capture
    logger.info("request failed: %s", leak)
    out = stream.getvalue()
    assert REDACTED in out
    for secret in (TELEGRAM_TOKEN, *SECRETS, "abcdefghijkl", "sk-zzzzzzzzzzzz", "ghijklmnop"):
        assert secret not in out


def test_secrets_are_redacted_from_tracebacks(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, _ = capture
    try:
        raise RuntimeError(f"connect to https://api.telegram.org/bot{TELEGRAM_TOKEN}/getMe")
    except RuntimeError:
        logger.exception("polling failed")
    out = stream.getvalue()
    assert "Traceback" in out and TELEGRAM_TOKEN not in out


def test_json_lines_carry_run_and_session_ids(
    capture: tuple[logging.Logger, io.StringIO, logging.Handler],
) -> None:
    logger, stream, handler = capture
    handler.setFormatter(JsonFormatter())
    token = run_id_var.set("run42")
    try:
        logger.warning("tool failed for %s", "sk-ant-api03-abcdefghijklmnop")
    finally:
        run_id_var.reset(token)
    line = json.loads(stream.getvalue().strip())
    assert line["run_id"] == "run42"
    assert line["level"] == "WARNING"
    assert "sk-ant" not in line["msg"]


def test_ordinary_text_is_left_alone() -> None:
    redact = Redactor(SECRETS)
    text = "turn finished in 1.2s, 15 tokens, chat -1001234567"
    assert redact(text) == text


def test_console_mode_keeps_info_off_stderr_but_in_the_log_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    noisy = {
        name: logging.getLogger(name).level
        for name in (
            "httpx",
            "httpcore",
            "telegram",
            "apscheduler",
            "slack_bolt",
            "slack_sdk",
            "aiohttp.access",
            "anthropic",
            "websockets",
        )
    }
    try:
        setup_logging(
            "INFO", "text", SECRETS, file=tmp_path / "logs" / "perch.log", quiet_stderr=True
        )
        log = logging.getLogger("test.console")
        log.info("HTTP Request: POST https://api.example/v1 sk-ant-api03-abcdefghijklmnop")
        log.warning("channel telegram could not start")
        for handler in root.handlers:
            handler.flush()
        err = capsys.readouterr().err
        written = (tmp_path / "logs" / "perch.log").read_text()
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for name, level in noisy.items():  # setup_logging quietens these process-wide
            logging.getLogger(name).setLevel(level)
    assert "HTTP Request" not in err and "could not start" in err
    assert "HTTP Request" in written and "could not start" in written
    assert "sk-ant-api03" not in written and REDACTED in written
