"""A fake WhatsApp Cloud API (Graph API) on 127.0.0.1, and Meta's side of the webhook.

Graph side: `GET /{phone-number-id}` (the doctor's probe), `POST /{phone-number-id}/messages`
(text, media, reactions, templates, read receipts with the typing indicator),
`POST /{phone-number-id}/media` (multipart upload), `GET /{media-id}` (the media's URL) and the
download itself. Every call needs `Authorization: Bearer <TOKEN>` (else error 190, as Meta
answers). Recipients in `outside_window` are refused with error 131047 at once; those in
`fail_later` are accepted and then reported `failed` with 131047 in a status callback, as Meta
does too.

Meta side: `post(body)` signs a webhook body with the app secret (or not, or wrongly) and
posts it to the daemon's webhook; `text`, `image`, `statuses` build bodies shaped like Meta's.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

TOKEN = "EAAfaketoken0123456789abcdefghij"
APP_SECRET = "app-secret-for-tests"
VERIFY_TOKEN = "verify-me"
PHONE_NUMBER_ID = "106540352242922"
ALICE = "15550100001"
BOB = "15550100002"

_ids = itertools.count(1)


def message_id() -> str:
    return f"wamid.HBgL{next(_ids):06d}"


@dataclass
class Call:
    """One Graph request as the fake saw it."""

    method: str
    path: str
    body: Any
    status: int


@dataclass
class Media:
    media_type: str
    data: bytes
    name: str = ""


@dataclass
class FakeGraph:
    """The fake server; `async with FakeGraph() as graph:` starts it on a free port."""

    calls: list[Call] = field(default_factory=list)
    media: dict[str, Media] = field(default_factory=dict)
    outside_window: set[str] = field(default_factory=set)
    fail_later: set[str] = field(default_factory=set)
    webhook_url: str = ""
    _runner: web.AppRunner | None = None
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _http: aiohttp.ClientSession | None = None
    port: int = 0

    async def __aenter__(self) -> FakeGraph:
        app = web.Application(client_max_size=50 * 1024 * 1024)
        app.router.add_get("/download/{media_id}", self._download)
        app.router.add_post("/v23.0/{number}/messages", self._messages)
        app.router.add_post("/v23.0/{number}/media", self._upload)
        app.router.add_get("/v23.0/{object_id}", self._object)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        self._http = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v23.0"

    # -- what the bot sent ------------------------------------------------------------------

    def sent(self, to: str | None = None, kind: str = "text") -> list[dict[str, Any]]:
        """The message bodies the bot posted successfully, of type `kind`, to `to`."""
        return [
            c.body
            for c in self.calls
            if c.path.endswith("/messages")
            and c.status == 200
            and c.body.get("type") == kind
            and (to is None or c.body.get("to") == to)
        ]

    def texts(self, to: str | None = None) -> list[str]:
        return [b["text"]["body"] for b in self.sent(to)]

    def read_receipts(self) -> list[dict[str, Any]]:
        return [c.body for c in self.calls if c.body and c.body.get("status") == "read"]

    async def wait(self, condition: Callable[[], bool], within: float = 30.0) -> None:
        try:
            async with asyncio.timeout(within):
                async with self._changed:
                    await self._changed.wait_for(condition)
        except TimeoutError:
            raise AssertionError(
                f"fake Graph API: condition not met within {within} s; calls: "
                f"{[(c.method, c.path, c.status) for c in self.calls]}"
            ) from None

    async def _record(self, call: Call) -> None:
        self.calls.append(call)
        async with self._changed:
            self._changed.notify_all()

    # -- Graph API -------------------------------------------------------------------------

    def _authorised(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {TOKEN}"

    @staticmethod
    def _error(status: int, code: int, message: str, details: str = "") -> web.Response:
        error: dict[str, Any] = {"message": message, "type": "OAuthException", "code": code}
        if details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": details}
        return web.json_response({"error": {**error, "fbtrace_id": "Afake"}}, status=status)

    async def _object(self, request: web.Request) -> web.Response:
        object_id = request.match_info["object_id"]
        if not self._authorised(request):
            await self._record(Call("GET", request.path, None, 401))
            return self._error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        await self._record(Call("GET", request.path, None, 200))
        if object_id == PHONE_NUMBER_ID:
            return web.json_response(
                {
                    "verified_name": "Perch Test",
                    "display_phone_number": "+1 555-010-9999",
                    "id": PHONE_NUMBER_ID,
                    "quality_rating": "GREEN",
                }
            )
        found = self.media.get(object_id)
        if found is None:
            return self._error(400, 100, "Unsupported get request.")
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "url": f"http://127.0.0.1:{self.port}/download/{object_id}",
                "mime_type": found.media_type,
                "sha256": hashlib.sha256(found.data).hexdigest(),
                "file_size": len(found.data),
                "id": object_id,
            }
        )

    async def _download(self, request: web.Request) -> web.Response:
        found = self.media.get(request.match_info["media_id"])
        status = 200 if self._authorised(request) and found is not None else 404
        await self._record(Call("GET", request.path, None, status))
        if status != 200 or found is None:
            return web.Response(status=status)
        return web.Response(body=found.data, content_type=found.media_type)

    async def _messages(self, request: web.Request) -> web.Response:
        body = await request.json()
        if not self._authorised(request):
            await self._record(Call("POST", request.path, body, 401))
            return self._error(401, 190, "Invalid OAuth access token")
        if body.get("messaging_product") != "whatsapp":
            await self._record(Call("POST", request.path, body, 400))
            return self._error(400, 100, "The parameter messaging_product is required.")
        if "status" in body:  # a read receipt (with the typing indicator)
            await self._record(Call("POST", request.path, body, 200))
            return web.json_response({"success": True})
        to = body.get("to")
        free_form = body.get("type") not in ("template", "reaction")
        if free_form and to in self.outside_window:
            await self._record(Call("POST", request.path, body, 400))
            return self._error(
                400,
                131047,
                "(#131047) Re-engagement message",
                "Message failed to send because more than 24 hours have passed since the "
                "customer last replied to this number.",
            )
        if body.get("type") == "text" and len(body["text"]["body"]) > 4096:
            await self._record(Call("POST", request.path, body, 400))
            return self._error(400, 100, "Param text['body'] must be at most 4096 characters")
        sent_id = message_id()
        await self._record(Call("POST", request.path, body, 200))
        if free_form and to in self.fail_later:
            asyncio.get_running_loop().create_task(self._report_failed(sent_id, str(to)))
        return web.json_response(
            {
                "messaging_product": "whatsapp",
                "contacts": [{"input": to, "wa_id": to}],
                "messages": [{"id": sent_id}],
            }
        )

    async def _report_failed(self, sent_id: str, to: str) -> None:
        await self.post(statuses([failed_status(sent_id, to, 131047)]))

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not self._authorised(request) or not isinstance(upload, web.FileField):
            await self._record(Call("POST", request.path, None, 400))
            return self._error(400, 100, "Upload needs a file")
        media_id = f"media{next(_ids)}"
        self.media[media_id] = Media(
            str(form.get("type") or upload.content_type), upload.file.read(), upload.filename
        )
        await self._record(Call("POST", request.path, {"id": media_id}, 200))
        return web.json_response({"id": media_id})

    # -- Meta's side of the webhook --------------------------------------------------------

    async def post(
        self, body: Any, *, secret: str | None = APP_SECRET, raw: bytes | None = None
    ) -> int:
        """POST a webhook body to the daemon, signed with `secret` (None: no signature); with
        `raw`, those bytes are sent instead of the body that was signed (a tampered post)."""
        assert self._http is not None and self.webhook_url, "set webhook_url first"
        signed = json.dumps(body).encode()
        data = raw if raw is not None else signed
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            digest = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
            headers["X-Hub-Signature-256"] = f"sha256={digest}"
        async with self._http.post(self.webhook_url, data=data, headers=headers) as response:
            status = response.status
        await self._record(Call("WEBHOOK", self.webhook_url, body, status))  # wakes waiters
        return status

    async def verify(self, token: str, challenge: str = "1158201444") -> tuple[int, str]:
        """Meta's verification GET; the status and the body answered."""
        assert self._http is not None
        query = {"hub.mode": "subscribe", "hub.verify_token": token, "hub.challenge": challenge}
        async with self._http.get(self.webhook_url, params=query) as response:
            return response.status, await response.text()


def envelope(value: dict[str, Any]) -> dict[str, Any]:
    """Meta's wrapping of one `messages` change for our number."""
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": "102290129340398",
                "changes": [
                    {
                        "field": "messages",
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550109999",
                                "phone_number_id": PHONE_NUMBER_ID,
                            },
                            **value,
                        },
                    }
                ],
            }
        ],
    }


def inbound(
    kind: str, content: dict[str, Any], *, sender: str = ALICE, name: str = "Alice", **extra: Any
) -> tuple[dict[str, Any], str]:
    """A webhook body with one message of type `kind` from `sender`, and its message id."""
    wamid = message_id()
    message = {
        "from": sender,
        "id": wamid,
        "timestamp": str(int(time.time())),
        "type": kind,
        kind: content,
        **extra,
    }
    body = envelope(
        {"contacts": [{"profile": {"name": name}, "wa_id": sender}], "messages": [message]}
    )
    return body, wamid


def text(body: str, *, sender: str = ALICE, **extra: Any) -> tuple[dict[str, Any], str]:
    return inbound("text", {"body": body}, sender=sender, **extra)


def statuses(items: list[dict[str, Any]]) -> dict[str, Any]:
    return envelope({"statuses": items})


def failed_status(sent_id: str, to: str, code: int) -> dict[str, Any]:
    return {
        "id": sent_id,
        "status": "failed",
        "timestamp": str(int(time.time())),
        "recipient_id": to,
        "errors": [
            {
                "code": code,
                "title": "Re-engagement message",
                "message": "Re-engagement message",
                "error_data": {
                    "details": "More than 24 hours have passed since the customer last replied."
                },
            }
        ],
    }
