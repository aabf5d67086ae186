"""Keeps the bot token and webhook secret out of logs.

Owns `SecretRedactor` (a logging filter that also redacts status text) and the list of loggers
it guards: PTB's, httpx's, aiohttp's and the adapter's own `channels.telegram` logger, which
every `channels/telegram*.py` module logs to.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import quote

LOGGER_NAME = "channels.telegram"


class SecretRedactor(logging.Filter):
    """Replaces the bot token (and webhook secret) in log records of PTB, httpx and ours."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        forms: set[str] = set()
        for secret in secrets:
            if secret:
                forms.update({secret, quote(secret, safe=""), quote(secret)})
        self._forms = sorted(forms, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, "<redacted>")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self.redact(formatted)
        return True


def library_loggers() -> list[logging.Logger]:
    """The loggers that may print the token: PTB's, httpx's, aiohttp's and the adapter's."""
    names = ["httpx", "httpcore", "aiohttp.access", "aiohttp.server", LOGGER_NAME]
    names += [
        name
        for name, obj in logging.Logger.manager.loggerDict.items()
        if isinstance(obj, logging.Logger) and name.startswith(("telegram", "httpcore"))
    ]
    return [logging.getLogger(name) for name in dict.fromkeys(names)]
