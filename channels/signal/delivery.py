"""Delivery to Signal through `POST /v2/send`: Markdown split into chunks and rendered to
Signal styles, the first chunk quoting the message it answers (groups only), retries on 429,
5xx and network errors (a 400 resent once as plain text), one sender per chat at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from channels.base import Outbound
from channels.chunking import split_markdown
from channels.formatting import render_signal_text, utf16_len
from channels.signal.api import SignalApi, SignalApiError, error_text
from channels.signal.text import parse_message_id, to_styled_mode

log = logging.getLogger("channels.signal")  # the whole Signal adapter logs under one name

_SEND_TIMEOUT = 30.0
_MAX_RETRY_AFTER = 120.0
_MAX_SEND_BACKOFF = 30.0
_REMEMBERED_SENT = 512


def _retry_after(headers: Mapping[str, str], data: Any) -> float | None:
    value: Any = headers.get("Retry-After")
    if value is None and isinstance(data, Mapping):
        value = data.get("retry_after") or data.get("retryAfterSeconds")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, min(seconds, _MAX_RETRY_AFTER))


def _sent_timestamps(data: Any) -> list[int]:
    """`/v2/send` answers `{"timestamp": "..."}` (or a list of those in some versions)."""
    items = data if isinstance(data, list) else [data]
    stamps: list[int] = []
    for item in items:
        if isinstance(item, Mapping):
            with contextlib.suppress(TypeError, ValueError):
                stamps.append(int(item.get("timestamp")))  # type: ignore[arg-type]
    return stamps


@dataclass(slots=True)
class _ChatLock:
    lock: asyncio.Lock
    users: int = 0


class SignalSender:
    """Sends as `account`; `sent` holds the timestamps of the latest messages it delivered
    (so a quote of one of them counts as talking to the bot)."""

    def __init__(
        self,
        api: SignalApi,
        account: str,
        *,
        chunk_limit: int,
        send_attempts: int,
        retry_initial: float,
    ) -> None:
        self._api = api
        self._account = account
        self._chunk_limit = chunk_limit
        self._send_attempts = send_attempts
        self._retry_initial = retry_initial
        self.sent: deque[int] = deque(maxlen=_REMEMBERED_SENT)
        self._chat_locks: dict[str, _ChatLock] = {}

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown: chunked, styled where safe, the first chunk quoting the message it
        answers (groups only). Raises `SignalApiError` when it cannot be delivered."""
        self._api.require_session()  # not started is not worth retrying
        chunks = split_markdown(out.text, self._chunk_limit, measure=utf16_len)
        quote = parse_message_id(out.chat.reply_to) if out.chat.is_group else None
        async with self._chat_turn(out.chat.chat_id):
            for chunk in chunks:
                plain, styles = render_signal_text(chunk)
                if not plain.strip():
                    continue
                await self._send_text(out.chat.chat_id, plain, styles, quote)
                quote = None

    async def _send_text(
        self, recipient: str, plain: str, styles: Sequence[str], quote: tuple[str, int] | None
    ) -> None:
        message, mode = to_styled_mode(plain, styles)
        body: dict[str, Any] = {
            "number": self._account,
            "recipients": [recipient],
            "message": message,
            "text_mode": mode,
        }
        if quote is not None:
            body["quote_author"], body["quote_timestamp"] = quote
        what = f"message to {recipient}"
        try:
            data = await self._post_with_retries("/v2/send", body, what)
        except SignalApiError as exc:
            if exc.status != 400 or (mode == "normal" and quote is None):
                raise
            log.warning("%s; sending it again as plain text without quote", exc)
            plain_body = {
                "number": self._account,
                "recipients": [recipient],
                "message": plain,
                "text_mode": "normal",
            }
            data = await self._post_with_retries("/v2/send", plain_body, what)
        self.sent.extend(_sent_timestamps(data))

    async def _post_with_retries(self, path: str, body: Mapping[str, Any], what: str) -> Any:
        attempts = max(1, self._send_attempts)
        delay = self._retry_initial
        problem = ""
        status: int | None = None
        for attempt in range(1, attempts + 1):
            try:
                status, data, headers = await self._api.request(
                    "POST", path, body, seconds=_SEND_TIMEOUT
                )
            except SignalApiError as exc:
                status, problem, wait = None, str(exc), delay
            else:
                if status < 300:
                    return data
                problem = f"HTTP {status}: {error_text(data, status)}"
                if status == 429:
                    retry_after = _retry_after(headers, data)
                    wait = delay if retry_after is None else retry_after
                elif status >= 500:
                    wait = delay
                else:
                    raise SignalApiError(
                        f"signal-cli-rest-api refused the {what} ({problem})", status
                    )
            if attempt == attempts:
                break
            log.warning(
                "Signal %s not sent (%s); retry %d/%d in %.2fs",
                what,
                problem,
                attempt,
                attempts - 1,
                wait,
            )
            await asyncio.sleep(wait)
            delay = min(delay * 2, _MAX_SEND_BACKOFF)
        raise SignalApiError(
            f"could not deliver the Signal {what} after {attempts} attempts ({problem}); "
            f"check that signal-cli-rest-api at {self._api.base} is up",
            status,
        )

    @contextlib.asynccontextmanager
    async def _chat_turn(self, chat_id: str) -> AsyncIterator[None]:
        """Per-chat ordering without a global lock: one sender per chat at a time."""
        entry = self._chat_locks.get(chat_id)
        if entry is None:
            entry = self._chat_locks[chat_id] = _ChatLock(asyncio.Lock())
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                self._chat_locks.pop(chat_id, None)
