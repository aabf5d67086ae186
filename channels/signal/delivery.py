"""Delivery to Signal through `POST /v2/send`: Markdown split into chunks and rendered to
Signal styles, the first chunk quoting the message it answers (groups only), retries on 429,
5xx and network errors (a 400 resent once as plain text), one sender per chat at a time.
"""

from __future__ import annotations

import base64
import contextlib
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from channels.base import Outbound, OutboundFile, Refused
from channels.chunking import split_markdown
from channels.formatting import utf16_len
from channels.ordering import ChatLocks
from channels.retry import RetryPolicy, call_with_retries
from channels.signal.api import SignalApi, SignalApiError, error_text
from channels.signal.render import render_signal_text
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


class _Transient(Exception):
    """A send that may work if tried again (network, 429, 5xx); the text says what failed."""

    def __init__(self, problem: str, status: int | None, retry_after: float | None) -> None:
        super().__init__(problem)
        self.status = status
        self.retry_after = retry_after


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
        self._turns = ChatLocks()

    async def send(self, out: Outbound) -> None:
        """Deliver Markdown: chunked, styled where safe, the first chunk quoting the message it
        answers (groups only). Raises `SignalApiError` when it cannot be delivered."""
        self._api.require_session()  # not started is not worth retrying
        chunks = split_markdown(out.text, self._chunk_limit, measure=utf16_len)
        quote = parse_message_id(out.chat.reply_to) if out.chat.is_group else None
        async with self._turns.hold(out.chat.chat_id):
            for chunk in chunks:
                plain, styles = render_signal_text(chunk)
                if not plain.strip():
                    continue
                await self._send_text(out.chat.chat_id, plain, styles, quote)
                quote = None

    async def send_file(self, out: OutboundFile) -> None:
        """One attachment, base64 in `/v2/send` with the caption as text; `Refused` when the
        service says no."""
        self._api.require_session()
        encoded = base64.b64encode(out.data).decode("ascii")
        name = out.name.replace(";", "_").replace(",", "_")
        body: dict[str, Any] = {
            "number": self._account,
            "recipients": [out.chat.chat_id],
            "message": out.caption,
            "base64_attachments": [f"data:{out.media_type};filename={name};base64,{encoded}"],
        }
        async with self._turns.hold(out.chat.chat_id):
            try:
                data = await self._post_with_retries(
                    "/v2/send", body, f"file to {out.chat.chat_id}"
                )
            except SignalApiError as exc:
                raise Refused(f"Signal: {exc}") from None
        self.sent.extend(_sent_timestamps(data))

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
        policy = RetryPolicy(max(1, self._send_attempts), self._retry_initial, _MAX_SEND_BACKOFF)

        async def attempt() -> Any:
            try:
                status, data, headers = await self._api.request(
                    "POST", path, body, seconds=_SEND_TIMEOUT
                )
            except SignalApiError as exc:
                raise _Transient(str(exc), None, None) from exc
            if status < 300:
                return data
            problem = f"HTTP {status}: {error_text(data, status)}"
            if status == 429:
                raise _Transient(problem, status, _retry_after(headers, data))
            if status >= 500:
                raise _Transient(problem, status, None)
            raise SignalApiError(f"signal-cli-rest-api refused the {what} ({problem})", status)

        def on_retry(exc: BaseException, number: int, wait: float) -> None:
            log.warning(
                "Signal %s not sent (%s); retry %d/%d in %.2fs",
                what,
                exc,
                number,
                policy.attempts - 1,
                wait,
            )

        try:
            return await call_with_retries(
                attempt,
                policy,
                retryable=lambda exc: isinstance(exc, _Transient),
                wait_hint=lambda exc: exc.retry_after if isinstance(exc, _Transient) else None,
                on_retry=on_retry,
            )
        except _Transient as exc:
            hint = (
                "it is failing for now (starting, restarting or overloaded); try again later "
                "and check that it is up"
                if exc.status is not None and exc.status >= 500
                else "check that it is up"
            )
            raise SignalApiError(
                f"could not deliver the Signal {what} after {policy.attempts} attempts ({exc}); "
                f"signal-cli-rest-api at {self._api.base}: {hint}",
                exc.status,
            ) from None
