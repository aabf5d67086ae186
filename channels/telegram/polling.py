"""Sees every Bot API answer: the health signal behind the Telegram channel's status.

Owns `ObservedRequest`, PTB's HTTP request class reporting each getUpdates outcome (PTB's own
error callback misses timeouts and flood waits) and turning an error page that is not JSON
(a proxy's HTML when Telegram is down) into a one-line description, so neither PTB's
traceback nor the page reaches the log; the error a failed answer stands for; and
`QuietFinalPoll`, which turns PTB's traceback when the last poll at stop fails into one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError

from channels.telegram.request import AiohttpRequest

UPDATER_LOGGER = "telegram.ext.Updater"


class QuietFinalPoll(logging.Filter):
    """PTB logs an ERROR with a traceback when the getUpdates it makes at stop (to confirm
    the updates already fetched) fails; that is one warning line: those updates may come
    again after a restart, and the daemon's inbox drops the repeats."""

    def filter(self, record: logging.LogRecord) -> bool:
        if "mark all fetched updates" not in record.getMessage():
            return True
        why = record.exc_info[1] if record.exc_info else None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = "telegram: the last poll at stop failed (%s); updates may come again"
        record.args = (type(why).__name__ if why is not None else "unknown error",)
        record.exc_info = record.exc_text = None
        return True


class ObservedRequest(AiohttpRequest):
    """PTB's request class (`AiohttpRequest`) reporting every getUpdates outcome, so polling
    health is visible."""

    def __init__(self, on_poll: Callable[[BaseException | None], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_poll = on_poll

    async def do_request(
        self, url: str, method: str, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        if not url.endswith("/getUpdates"):
            code, payload = await super().do_request(url, method, *args, **kwargs)
            return code, readable_error_payload(code, payload)
        try:
            code, payload = await super().do_request(url, method, *args, **kwargs)
        except Exception as exc:
            self._on_poll(exc)
            raise
        payload = readable_error_payload(code, payload)
        self._on_poll(None if 200 <= code < 300 else poll_error(code, payload))
        return code, payload


def status_phrase(code: int) -> str:
    """`Bad Gateway (HTTP 502)`: how a failed answer without a description reads."""
    try:
        return f"{HTTPStatus(code).phrase} (HTTP {code})"
    except ValueError:
        return f"HTTP {code}"


def readable_error_payload(code: int, payload: bytes) -> bytes:
    """An error answer as PTB can read it: JSON stays as it is; anything else (an HTML error
    page) becomes `{"ok": false, "description": "Bad Gateway (HTTP 502)"}`."""
    if 200 <= code < 300:
        return payload
    try:
        if isinstance(json.loads(payload), dict):
            return payload
    except ValueError:
        pass
    body = {"ok": False, "error_code": code, "description": status_phrase(code)}
    return json.dumps(body).encode()


def poll_error(code: int, payload: bytes) -> TelegramError:
    """The error PTB will raise for a failed getUpdates answer, for the status line."""
    try:
        body = json.loads(payload)
        description = str(body.get("description") or status_phrase(code))
        retry_after = (body.get("parameters") or {}).get("retry_after")
    except (ValueError, AttributeError):
        description, retry_after = status_phrase(code), None
    if retry_after:
        return RetryAfter(retry_after)
    if code in (401, 404):
        return InvalidToken(description)
    if code == 409:
        return Conflict(description)
    return NetworkError(description)
