"""Sees every long poll: the health signal behind the Telegram channel's status.

Owns `ObservedRequest`, PTB's HTTP request class reporting each getUpdates outcome (PTB's own
error callback misses timeouts and flood waits), and the error a failed answer stands for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.request import HTTPXRequest


class ObservedRequest(HTTPXRequest):
    """HTTPXRequest that reports every getUpdates outcome, so polling health is visible."""

    def __init__(self, on_poll: Callable[[BaseException | None], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_poll = on_poll

    async def do_request(
        self, url: str, method: str, *args: Any, **kwargs: Any
    ) -> tuple[int, bytes]:
        if not url.endswith("/getUpdates"):
            return await super().do_request(url, method, *args, **kwargs)
        try:
            code, payload = await super().do_request(url, method, *args, **kwargs)
        except Exception as exc:
            self._on_poll(exc)
            raise
        self._on_poll(None if 200 <= code < 300 else poll_error(code, payload))
        return code, payload


def poll_error(code: int, payload: bytes) -> TelegramError:
    """The error PTB will raise for a failed getUpdates answer, for the status line."""
    try:
        body = json.loads(payload)
        description = str(body.get("description") or f"HTTP {code}")
        retry_after = (body.get("parameters") or {}).get("retry_after")
    except (ValueError, AttributeError):
        description, retry_after = f"HTTP {code}", None
    if retry_after:
        return RetryAfter(retry_after)
    if code in (401, 404):
        return InvalidToken(description)
    if code == 409:
        return Conflict(description)
    return NetworkError(description)
