"""The HTTP client for signal-cli-rest-api: the service URL and its basic auth, the aiohttp
session, one JSON request whose errors name the endpoint (`SignalApiError`), and attachment
downloads bounded by size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import aiohttp
from yarl import URL

CONNECT_TIMEOUT = 10.0
SMALL_REQUEST_TIMEOUT = 10.0
_ATTACHMENT_TIMEOUT = 30.0


class SignalApiError(Exception):
    """signal-cli-rest-api refused a request or could not be reached; `status` is the HTTP
    status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _json_or_none(raw: bytes) -> Any:
    """signal-cli-rest-api bodies are JSON, sometimes labelled text/plain."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def error_text(data: Any, raw_status: int) -> str:
    """The service's own error message from a decoded body (on one line), else the status's
    phrase ("Service Unavailable"): an error page that is not JSON is never repeated."""
    if isinstance(data, Mapping) and data.get("error"):
        return " ".join(str(data["error"]).split())[:300]
    try:
        return HTTPStatus(raw_status).phrase
    except ValueError:
        return f"HTTP {raw_status}"


class SignalApi:
    """signal-cli-rest-api at `service_url`; `open()` before requests, `close()` after.

    `base` is the URL without credentials (safe to show), `ws_base` the same for websockets.
    """

    def __init__(self, service_url: str) -> None:
        service = URL(service_url)
        self._headers = (
            {"Authorization": aiohttp.encode_basic_auth(service.user, service.password or "")}
            if service.user
            else {}
        )
        self.base = str(service.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
        ws_scheme = "wss" if service.scheme == "https" else "ws"
        self.ws_base = ws_scheme + self.base[len(service.scheme) :]
        self._session: aiohttp.ClientSession | None = None

    def open(self) -> None:
        """Create the HTTP session (its connect timeout bounds every request)."""
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
            headers=self._headers,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise SignalApiError("the Signal channel is not started (call start() first)")
        return self._session

    async def request(
        self, method: str, path: str, body: Any = None, *, seconds: float
    ) -> tuple[int, Any, Mapping[str, str]]:
        session = self.require_session()
        try:
            async with session.request(
                method,
                f"{self.base}{path}",
                json=body,
                timeout=aiohttp.ClientTimeout(total=seconds),
            ) as resp:
                raw = await resp.read()
                return resp.status, _json_or_none(raw), resp.headers
        except (aiohttp.ClientError, TimeoutError) as exc:
            reason = str(exc) or type(exc).__name__
            raise SignalApiError(f"{method} {path} failed: {reason}") from None

    async def expect_ok(self, method: str, path: str, body: Any) -> None:
        status, data, _ = await self.request(method, path, body, seconds=SMALL_REQUEST_TIMEOUT)
        if status >= 300:
            raise SignalApiError(
                f"{method} {path} answered HTTP {status}: {error_text(data, status)}", status
            )

    async def download(self, attachment_id: str, limit: int) -> bytes | None:
        """The attachment's bytes, or None when it is larger than `limit`."""
        session = self.require_session()
        url = f"{self.base}/v1/attachments/{attachment_id}"
        try:
            async with session.get(
                url, timeout=aiohttp.ClientTimeout(total=_ATTACHMENT_TIMEOUT)
            ) as resp:
                if resp.status != 200:
                    raise SignalApiError(
                        f"GET /v1/attachments/{attachment_id} answered HTTP {resp.status}",
                        resp.status,
                    )
                buffer = bytearray()
                async for block in resp.content.iter_chunked(64 * 1024):
                    buffer += block
                    if len(buffer) > limit:
                        return None
                return bytes(buffer)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SignalApiError(f"GET /v1/attachments/{attachment_id} failed: {exc}") from None
