"""Logging: one line per event, text for terminals or JSON for journald, secrets redacted.

`setup_logging(level, fmt, secrets)` installs a root handler whose filter runs the one
redactor (`bot/config/redact.py` `Redactor`: every configured secret, every URL's and DSN's
password, token shapes) over the message and the exception text. `run_id`
and `session` context variables are added to every line of a run, and `trace_id` (the turn's
OpenTelemetry trace, when it is traced) to every line of a turn.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from bot.config.redact import REDACTED as REDACTED
from bot.config.redact import Redactor as Redactor
from channels import registry

run_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("run_id", default="")
session_var: contextvars.ContextVar[str] = contextvars.ContextVar("session", default="")
trace_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("trace_id", default="")


class RedactingFilter(logging.Filter):
    """Renders each record once, redacted, so no handler can leak a secret."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg = self.redact(message)
        record.args = None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        record.__dict__["run_id"] = run_id_var.get()
        record.__dict__["session"] = session_var.get()
        record.__dict__["trace_id"] = trace_id_var.get()
        return True


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        ctx = ""
        run_id, session = getattr(record, "run_id", ""), getattr(record, "session", "")
        if run_id:
            ctx = f" run={run_id}"
        if session:
            ctx += f" session={session}"
        if trace_id := getattr(record, "trace_id", ""):
            ctx += f" trace={trace_id}"
        line = f"{stamp} {record.levelname:<7} {record.name}{ctx}: {record.getMessage()}"
        if record.exc_text:
            line += "\n" + record.exc_text
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in ("run_id", "session", "trace_id"):
            value = getattr(record, field, "")
            if value:
                data[field] = value
        if record.exc_text:
            data["exc"] = record.exc_text
        return json.dumps(data, ensure_ascii=False)


def setup_logging(
    level: str = "INFO",
    fmt: str = "text",
    secrets: Iterable[str] = (),
    *,
    file: Path | None = None,
    quiet_stderr: bool = False,
) -> None:
    """Log to stderr (and to `file` when given), redacted. `quiet_stderr` (the console
    channel is talking on this terminal) lets only warnings and errors reach stderr, so log
    lines don't run into the conversation; `file` still gets every line at `level`."""
    redacting = RedactingFilter(Redactor(secrets))
    handler: logging.Handler = logging.StreamHandler(sys.stderr)
    handlers = [handler]
    if quiet_stderr:
        handler.setLevel(max(logging.WARNING, logging.getLevelName(level)))
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(file, encoding="utf-8"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for h in handlers:
        h.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
        h.addFilter(redacting)
        root.addHandler(h)
    root.setLevel(level)
    # Chatty libraries log request URLs (a bot token may be in them) at INFO/DEBUG.
    for noisy in (
        "httpx",
        "httpcore",
        "apscheduler",
        "aiohttp.access",
        "anthropic",
        "websockets",
        *registry.quiet_loggers(),
    ):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))


def divert_stderr(path: Path) -> TextIO:
    """Point file descriptor 2 at `path` (appended, mode 0600) while the console owns the
    terminal, so log lines and what child processes (MCP servers) write to stderr land in the
    log and never in the conversation. Returns a stream on the terminal stderr was, for the
    few lines that must still reach the person (a failed start); `restore_stderr` undoes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stderr.flush()
    os.dup2(fd, 2)
    os.close(fd)
    return terminal


def restore_stderr(terminal: TextIO) -> None:
    sys.stderr.flush()
    os.dup2(terminal.fileno(), 2)
    terminal.close()


def ensure_standard_fds() -> None:
    """Reopen a closed stdin, stdout or stderr (`perch run <&-`) on /dev/null, so no file the
    daemon opens later becomes "stdin" by accident."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)
