"""How Telegram's failures read: the error senders raise, and PTB's errors put into words.

Owns `TelegramDeliveryError`, the flood wait of a `RetryAfter`, the "can't parse entities"
test, and the short, secret-free description used in status lines and logs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from telegram.error import BadRequest, Conflict, InvalidToken, RetryAfter, TimedOut


class TelegramDeliveryError(RuntimeError):
    """Telegram did not take a message after the bounded retries; the text says why.

    `retry_after` is Telegram's flood wait in seconds when that was the reason.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_seconds(exc: RetryAfter) -> float:
    value: object = exc.retry_after
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) if isinstance(value, int | float) else 1.0


def is_parse_error(exc: BadRequest) -> bool:
    return "can't parse entities" in str(exc).lower()


def describe_error(exc: BaseException, redact: Callable[[str], str]) -> str:
    """A few words on what went wrong, for a status line or a log; secrets go through `redact`."""
    if isinstance(exc, RetryAfter):
        return f"rate limited for {retry_after_seconds(exc):.0f} s"
    if isinstance(exc, TimedOut):
        return "timed out"
    if isinstance(exc, InvalidToken):
        return "token rejected: check channels.telegram.token"
    if isinstance(exc, Conflict):
        return "another process is polling this bot: run only one instance per token"
    text = str(exc) or type(exc).__name__
    return redact(text)
