"""A fake Telegram Bot API on 127.0.0.1 that python-telegram-bot talks to.

Serves `/bot<TOKEN>/<method>` (form-urlencoded as PTB sends it, or JSON) and file downloads
at `/file/bot<TOKEN>/<path>`. Long polls are held until an update is pushed, the timeout runs
out or the server stops. Every request is recorded as a `Call` so tests assert on what
Telegram received; `fail_next` scripts errors (429 flood waits, 400 parse errors, 502s).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "123456:TEST-fake_token"
BOT_ID = 123456
BOT_USERNAME = "fakebot"
PARSE_ERROR = (
    "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\""
)

# Parameters PTB sends JSON-encoded, and those that are numbers on the wire.
_JSON_KEYS = {
    "reply_parameters",
    "reply_markup",
    "entities",
    "caption_entities",
    "allowed_updates",
    "link_preview_options",
    "reaction",
}
_INT_KEYS = {"chat_id", "message_id", "message_thread_id", "offset", "limit", "timeout"}


@dataclass
class Call:
    """One request the fake received; `status` is what it answered."""

    method: str
    params: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)
    result: Any = None  # what the fake answered (the sent message, for sendMessage)

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class Upload:
    """A file sent to the fake in a multipart request."""

    filename: str
    content_type: str
    data: bytes


@dataclass
class _Failure:
    status: int
    description: str
    retry_after: float | None
    when: Callable[[dict[str, Any]], bool] | None
    html: str | None = None


def _decode(key: str, value: Any) -> Any:
    if isinstance(value, str):
        if key in _JSON_KEYS:
            return json.loads(value)
        if key in _INT_KEYS and value.lstrip("-").isdigit():
            return int(value)
    return value


class FakeTelegram:
    """The Bot API of one bot. Use as `async with FakeTelegram() as tg:`."""

    def __init__(
        self, token: str = TOKEN, bot_id: int = BOT_ID, username: str = BOT_USERNAME
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.username = username
        self.port = 0
        self.sent: list[Call] = []
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1000)
        self._failures: dict[str, list[_Failure]] = {}
        self._files: dict[str, tuple[str, bytes]] = {}
        self._changed = asyncio.Condition()
        self._closing = False
        self._runner: web.AppRunner | None = None
        self.webhook: dict[str, Any] | None = None
        self.download_gate: asyncio.Event | None = None  # set: downloads wait for it

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1 (`port` 0 picks a free one; reuse `self.port` to come back)."""
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._closing = False

    async def stop(self) -> None:
        """Go away: held long polls are answered empty, then the port closes."""
        self._closing = True
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeTelegram:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    # -- test knobs -----------------------------------------------------------------------

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue an update (an `update_id` is assigned) and wake held long polls."""
        update = {"update_id": next(self._update_ids), **update}
        self._updates.append(update)
        asyncio.get_running_loop().create_task(self._notify())
        return update

    def message(
        self,
        text: str | None,
        *,
        chat_id: int,
        chat_type: str,
        user_id: int = 42,
        first_name: str = "Ada",
        username: str = "ada",
        entities: list[dict[str, Any]] | None = None,
        thread_id: int | None = None,
        reply_to: dict[str, Any] | None = None,
        from_bot: bool = False,
        kind: str = "message",
        **extra: Any,
    ) -> dict[str, Any]:
        """Push a message update and return the message. `kind` may be "edited_message"."""
        sender = (
            {"id": self.bot_id, "is_bot": True, "first_name": "Fake", "username": self.username}
            if from_bot
            else {"id": user_id, "is_bot": False, "first_name": first_name, "username": username}
        )
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "Test group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
            **extra,
        }
        if text is not None:
            message["text"] = text
        if entities:
            message["entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            chat["is_forum"] = True
        if reply_to is not None:
            message["reply_to_message"] = reply_to
        if kind == "edited_message":
            message["edit_date"] = int(time.time())
        self.push_update({kind: message})
        return message

    def dm(self, text: str | None, *, user_id: int = 42, **kwargs: Any) -> dict[str, Any]:
        """Push a private message from `user_id` (the chat id equals the user id)."""
        return self.message(text, chat_id=user_id, chat_type="private", user_id=user_id, **kwargs)

    def group_message(
        self,
        text: str | None,
        *,
        chat_id: int = -1001234,
        mention: bool = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Push a supergroup message; `mention=True` prefixes `@<bot>` with its entity."""
        entities = kwargs.pop("entities", None)
        if mention and text is not None:
            handle = "@" + self.username
            text = f"{handle} {text}"
            entities = [{"type": "mention", "offset": 0, "length": len(handle)}, *(entities or [])]
        return self.message(
            text, chat_id=chat_id, chat_type="supergroup", entities=entities, **kwargs
        )

    def bot_message(
        self, text: str, *, chat_id: int, chat_type: str = "supergroup"
    ) -> dict[str, Any]:
        """A message as if the bot had sent it (for replies to the bot)."""
        return {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type},
            "from": {
                "id": self.bot_id,
                "is_bot": True,
                "first_name": "Fake",
                "username": self.username,
            },
            "text": text,
        }

    def add_file(self, file_id: str, data: bytes, path: str | None = None) -> None:
        """Make `getFile(file_id)` answer and its download serve `data`."""
        self._files[file_id] = (path or f"photos/{file_id}.bin", data)

    def fail_next(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: float | None = 1,
        description: str | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
        html: str | None = None,
    ) -> None:
        """Answer the next `times` calls of `method` (matching `when`) with an error.

        `html` answers with that text/html page instead of JSON, as a proxy in front of the
        Bot API does when Telegram is down."""
        if status != 429:
            retry_after = None
        text = description or (
            f"Too Many Requests: retry after {retry_after}" if status == 429 else "Bad Gateway"
        )
        failures = self._failures.setdefault(method, [])
        failures.extend(_Failure(status, text, retry_after, when, html) for _ in range(times))

    def reject_parse_mode_once(self, method: str = "sendMessage") -> None:
        """The next `method` call carrying a parse_mode gets 400 "can't parse entities"."""
        self.fail_next(
            method, 400, description=PARSE_ERROR, when=lambda params: "parse_mode" in params
        )

    def calls(self, method: str, *, ok_only: bool = True) -> list[Call]:
        return [c for c in self.sent if c.method == method and (c.ok or not ok_only)]

    def texts(self, method: str = "sendMessage") -> list[str]:
        """The texts Telegram accepted for `method`, in order."""
        return [str(c.params.get("text")) for c in self.calls(method)]

    def visible_texts(self) -> list[str]:
        """The texts of the bot's messages as the chat shows them now: sent, edited, not
        deleted (a streamed preview that was deleted is gone)."""
        shown: dict[int, str] = {}
        for call in self.sent:
            if not call.ok:
                continue
            if call.method == "sendMessage":
                shown[int(call.result["message_id"])] = call.params.get("text", "")
            elif call.method == "editMessageText":
                shown[int(call.params["message_id"])] = call.params.get("text", "")
            elif call.method == "deleteMessage":
                shown.pop(int(call.params["message_id"]), None)
        return list(shown.values())

    async def wait_for(
        self, method: str, n: int = 1, timeout: float = 5.0, *, ok_only: bool = True
    ) -> list[Call]:
        """Wait until `n` calls of `method` were answered (successfully, by default)."""

        def enough() -> bool:
            return len(self.calls(method, ok_only=ok_only)) >= n

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(enough), timeout)
        return self.calls(method, ok_only=ok_only)

    # -- the API --------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            body = await request.json()
            params.update(body or {})
        elif request.can_read_body:
            form = await request.post()
            for k, v in form.items():
                if isinstance(v, str):
                    params[k] = v
                else:  # an uploaded file (multipart): its name, type and bytes
                    params[k] = Upload(v.filename, v.content_type, v.file.read())
        return {k: _decode(k, v) for k, v in params.items()}

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await self._params(request)
        if request.match_info["token"] != self.token:
            return self._record(method, params, 401, {"description": "Unauthorized"})
        failure = self._take_failure(method, params)
        if failure is not None:
            if failure.html is not None:
                self._record(method, params, failure.status, {})
                return web.Response(
                    status=failure.status, text=failure.html, content_type="text/html"
                )
            body: dict[str, Any] = {"description": failure.description}
            if failure.retry_after is not None:
                body["parameters"] = {"retry_after": failure.retry_after}
            return self._record(method, params, failure.status, body)
        if method == "getUpdates":
            return self._record(method, params, 200, {"result": await self._get_updates(params)})
        handler = getattr(self, f"_m_{method}", None)
        if handler is None:
            return self._record(method, params, 404, {"description": "Not Found"})
        result = handler(params)
        return self._record(method, params, 200, {"result": result})

    def _take_failure(self, method: str, params: dict[str, Any]) -> _Failure | None:
        for failure in self._failures.get(method, []):
            if failure.when is None or failure.when(params):
                self._failures[method].remove(failure)
                return failure
        return None

    def _record(
        self, method: str, params: dict[str, Any], status: int, body: dict[str, Any]
    ) -> web.Response:
        self.sent.append(Call(method, params, status, result=body.get("result")))
        asyncio.get_running_loop().create_task(self._notify())
        if status == 200:
            return web.json_response({"ok": True, **body})
        return web.json_response({"ok": False, "error_code": status, **body}, status=status)

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        if offset:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)

        def ready() -> bool:
            return bool(self._updates) or self._closing

        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
        return [] if self._closing else list(self._updates)

    def _m_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Fake",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    def _m_deleteWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = None
        return True

    def _m_setWebhook(self, params: dict[str, Any]) -> bool:
        self.webhook = params
        return True

    def _m_sendChatAction(self, params: dict[str, Any]) -> bool:
        return True

    def _m_deleteMessage(self, params: dict[str, Any]) -> bool:
        return True

    def _m_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params["chat_id"]
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if int(chat_id) > 0 else "supergroup"},
            "from": self._m_getMe(params),
            "text": params.get("text", ""),
        }
        if "message_thread_id" in params:
            message["message_thread_id"] = params["message_thread_id"]
        return message

    def _m_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._m_sendMessage(params)
        message["message_id"] = params["message_id"]
        message["edit_date"] = int(time.time())
        return message

    def _m_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._m_sendMessage(params)
        upload = params.get("document")
        name = upload.filename if isinstance(upload, Upload) else str(upload)
        message["document"] = {"file_id": f"doc-{name}", "file_unique_id": "u", "file_name": name}
        return message

    def _m_sendVoice(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._m_sendMessage(params)
        message.pop("text", None)
        if "caption" in params:
            message["caption"] = params["caption"]
        message["voice"] = {
            "file_id": "sent-voice",
            "file_unique_id": "u",
            "duration": int(params.get("duration", 1)),
            "mime_type": "audio/ogg",
        }
        return message

    def _m_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:
        message = self._m_sendMessage(params)
        message["photo"] = [{"file_id": "p", "file_unique_id": "u", "width": 1, "height": 1}]
        return message

    def _m_setMessageReaction(self, params: dict[str, Any]) -> bool:
        return True

    def _m_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        return True

    def tap(self, card: Call, data: str, *, user_id: int = 42, first_name: str = "Ada") -> str:
        """Push a `callback_query`: `user_id` tapped the inline button with `data` under the
        message `card` (a sendMessage call the fake answered). Returns the query's id."""
        query_id = f"q{next(self._update_ids)}"
        params = card.params
        chat_id = int(params["chat_id"])
        message = {
            "message_id": card.result["message_id"],
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self._m_getMe(params),
            "text": params.get("text", ""),
            "reply_markup": params.get("reply_markup"),
        }
        sender = {"id": user_id, "is_bot": False, "first_name": first_name}
        query = {"id": query_id, "from": sender, "chat_instance": "ci", "data": data}
        self.push_update({"callback_query": {**query, "message": message}})
        return query_id

    def buttons(self, card: Call) -> list[tuple[str, str]]:
        """The (label, callback_data) of the inline keyboard sent with `card`."""
        markup = card.params.get("reply_markup") or {}
        rows = markup.get("inline_keyboard", [])
        return [(b["text"], b["callback_data"]) for row in rows for b in row]

    def voice(
        self, data: bytes, *, user_id: int = 42, duration: int = 3, caption: str | None = None
    ) -> dict[str, Any]:
        """Push a DM voice note whose file (`getFile` + download) serves `data`."""
        file_id = f"voice-{len(self._files)}"
        self.add_file(file_id, data, f"voice/{file_id}.oga")
        extra: dict[str, Any] = {
            "voice": {
                "file_id": file_id,
                "file_unique_id": f"u-{file_id}",
                "duration": duration,
                "mime_type": "audio/ogg",
                "file_size": len(data),
            }
        }
        if caption is not None:
            extra["caption"] = caption
        return self.dm(None, user_id=user_id, **extra)

    def document(
        self, data: bytes, name: str, mime_type: str, *, user_id: int = 42, size: int | None = None
    ) -> dict[str, Any]:
        """Push a DM document; `size` overrides the size Telegram declares."""
        file_id = f"doc-{len(self._files)}"
        self.add_file(file_id, data, f"documents/{file_id}")
        document = {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_name": name,
            "mime_type": mime_type,
            "file_size": len(data) if size is None else size,
        }
        return self.dm(None, user_id=user_id, document=document)

    def _m_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params["file_id"])
        path, data = self._files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(data),
            "file_path": path,
        }

    async def _download(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        self.sent.append(Call("download", {"path": path}))
        await self._notify()
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        if self.download_gate is not None:
            await self.download_gate.wait()
        for file_path, data in self._files.values():
            if file_path == path:
                return web.Response(body=data)
        return web.Response(status=404)
