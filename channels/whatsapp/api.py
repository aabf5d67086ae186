"""The Graph API client of the WhatsApp channel: one JSON call whose failure carries Meta's
error (`GraphError`: HTTP status, error code, its details), retried on 429, 5xx and network
errors, media uploads and size-bounded media downloads by id.

Every call goes to `api_base` (default `https://graph.facebook.com/v23.0`), so tests point it
at a local fake. The access token travels in the `Authorization` header only, never in a URL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from channels.retry import RetryPolicy, call_with_retries

log = logging.getLogger("channels.whatsapp")

CONNECT_TIMEOUT = 10.0
CALL_TIMEOUT = 30.0
_MAX_RETRY_AFTER = 60.0

# Meta's error codes the channel acts on (developers.facebook.com, Cloud API error codes).
REENGAGEMENT = 131047  # more than 24 hours since the customer last wrote
RATE_LIMITS = frozenset({4, 80007, 130429, 131048, 131056})


@dataclass(frozen=True, slots=True)
class MediaInfo:
    """What `GET /{media-id}` says of a media object: where to fetch it, its type and size."""

    url: str
    mime_type: str
    size: int | None


class GraphError(Exception):
    """The Graph API refused a call or could not be reached. `status` is the HTTP status
    (None: no answer), `code` Meta's error code (0: none given), `details` its explanation."""

    def __init__(self, message: str, status: int | None = None, code: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    @property
    def transient(self) -> bool:
        """Worth trying again: no answer, 429, 5xx, or one of Meta's rate-limit codes."""
        return (
            self.status is None
            or self.status == 429
            or self.status >= 500
            or self.code in RATE_LIMITS
        )


def graph_error(status: int, data: Any, what: str) -> GraphError:
    """The `GraphError` for an answer `{"error": {"message", "code", "error_data": ...}}`."""
    error = data.get("error") if isinstance(data, Mapping) else None
    if not isinstance(error, Mapping):
        return GraphError(f"{what} answered HTTP {status}", status)
    code = error.get("code")
    code = code if isinstance(code, int) else 0
    message = " ".join(str(error.get("message") or f"HTTP {status}").split())[:300]
    details = error.get("error_data")
    if isinstance(details, Mapping) and details.get("details"):
        message += f" ({' '.join(str(details['details']).split())[:300]})"
    return GraphError(f"{what} failed: {message} [code {code}]", status, code)


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


class GraphApi:
    """The Cloud API for one business phone number; `open()` before calls, `close()` after."""

    def __init__(self, api_base: str, phone_number_id: str, token: str, retry: RetryPolicy):
        self.base = api_base.rstrip("/")
        self.phone_number_id = phone_number_id
        self._auth = {"Authorization": f"Bearer {token}"}
        self._retry = retry
        self._session: aiohttp.ClientSession | None = None

    def open(self) -> None:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
            headers=self._auth,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _require(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise GraphError("the WhatsApp channel is not started")
        return self._session

    async def call(
        self, method: str, path: str, *, body: Any = None, form: aiohttp.FormData | None = None
    ) -> Any:
        """One Graph call, retried while it fails transiently; its JSON answer, or
        `GraphError`. A form (uploads) is rebuilt by the caller, so it is tried once."""

        async def once() -> Any:
            session = self._require()
            try:
                async with session.request(
                    method,
                    f"{self.base}{path}",
                    json=body,
                    data=form,
                    timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT),
                ) as resp:
                    data = _decoded(await resp.read())
                    if resp.status >= 300:
                        raise graph_error(resp.status, data, f"{method} {path}")
                    return data
            except (aiohttp.ClientError, TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
                raise GraphError(f"{method} {path} failed: {reason}") from None

        if form is not None:
            return await once()
        return await call_with_retries(
            once,
            self._retry,
            retryable=lambda exc: isinstance(exc, GraphError) and exc.transient,
            on_retry=lambda exc, attempt, wait: log.info(
                "WhatsApp: %s; retry %d in %.1f s", exc, attempt, wait
            ),
        )

    async def messages(self, payload: Mapping[str, Any]) -> str:
        """`POST /{phone-number-id}/messages`; the new message's id (`wamid...`), or ""."""
        data = await self.call(
            "POST",
            f"/{self.phone_number_id}/messages",
            body={"messaging_product": "whatsapp", **payload},
        )
        sent = data.get("messages") if isinstance(data, Mapping) else None
        if isinstance(sent, list) and sent and isinstance(sent[0], Mapping):
            return str(sent[0].get("id") or "")
        return ""

    async def upload(self, name: str, media_type: str, data: bytes) -> str:
        """Upload a file for sending (`POST /{phone-number-id}/media`); its media id."""
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", media_type)
        form.add_field("file", data, filename=name, content_type=media_type)
        answer = await self.call("POST", f"/{self.phone_number_id}/media", form=form)
        media_id = answer.get("id") if isinstance(answer, Mapping) else None
        if not media_id:
            raise GraphError("POST /media answered no media id")
        return str(media_id)

    async def media_info(self, media_id: str) -> MediaInfo:
        """Where media `media_id` can be fetched (the URL lives a few minutes)."""
        data = await self.call("GET", f"/{media_id}")
        if not isinstance(data, Mapping) or not data.get("url"):
            raise GraphError(f"GET /{media_id} answered no url")
        size = data.get("file_size")
        return MediaInfo(
            str(data["url"]),
            str(data.get("mime_type") or "application/octet-stream"),
            int(size) if isinstance(size, int | str) and str(size).isdigit() else None,
        )

    async def download(self, url: str, limit: int, seconds: float) -> bytes | None:
        """The bytes at a media URL (sent with the token, as Meta requires), or None when
        there are more than `limit`."""
        session = self._require()
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=seconds)) as resp:
                if resp.status != 200:
                    raise GraphError(f"media download answered HTTP {resp.status}", resp.status)
                buffer = bytearray()
                async for block in resp.content.iter_chunked(64 * 1024):
                    buffer += block
                    if len(buffer) > limit:
                        return None
                return bytes(buffer)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise GraphError(f"media download failed: {str(exc) or type(exc).__name__}") from None
