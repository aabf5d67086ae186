"""The fake Discord's REST routes: one handler per endpoint the adapter uses, answering as
Discord does (JSON with `Content-Type: application/json`, 204 for no content, Discord's error
codes where the adapter acts on them)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes import discord_payloads as p
from tests.fakes.discord_payloads import ALICE

if TYPE_CHECKING:
    from tests.fakes.discord import DiscordCall, FakeDiscord


def json_answer(
    data: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer as Discord sends it: `Content-Type: application/json`, no charset
    (discord.py parses the body only then)."""
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


async def _me(fake: FakeDiscord, call: DiscordCall) -> Any:
    return p.bot_user()


async def _application(fake: FakeDiscord, call: DiscordCall) -> Any:
    return p.application()


async def _gateway_bot(fake: FakeDiscord, call: DiscordCall) -> Any:
    return {
        "url": f"ws://127.0.0.1:{fake.port}/gateway",
        "shards": 1,
        "session_start_limit": {
            "total": 1000,
            "remaining": 999,
            "reset_after": 14_400_000,
            "max_concurrency": 1,
        },
    }


async def _channel(fake: FakeDiscord, call: DiscordCall) -> Any:
    channel_id = call.params["channel_id"]
    for known in (fake.threads, fake.channels):
        if channel_id in known:
            return known[channel_id]
    for user_id, dm_id in fake.dm_channels.items():
        if dm_id == channel_id:
            return {"id": dm_id, "type": 1, "recipients": [{**ALICE, "id": user_id}]}
    return json_answer({"message": "Unknown Channel", "code": 10003}, status=404)


async def _open_dm(fake: FakeDiscord, call: DiscordCall) -> Any:
    user_id = str(call.body["recipient_id"])
    dm_id = fake.dm_channels.setdefault(user_id, p.snowflake())
    return {
        "id": dm_id,
        "type": 1,
        "last_message_id": None,
        "recipients": [{**ALICE, "id": user_id}],
    }


async def _create_message(fake: FakeDiscord, call: DiscordCall) -> Any:
    names = [name for name, _ in call.files.values()]
    return await fake.post_message(call.params["channel_id"], call.body, names)


async def _edit_message(fake: FakeDiscord, call: DiscordCall) -> Any:
    posted = fake.messages.get(call.params["message_id"])
    if posted is None:
        return json_answer({"message": "Unknown Message", "code": 10008}, status=404)
    async with fake.changed:
        posted.content = str(call.body.get("content") or "")
        posted.edits.append(posted.content)
        if "components" in call.body:
            posted.components = list(call.body["components"] or [])
        fake.changed.notify_all()
    guild = p.GUILD_ID if posted.channel_id not in fake.dm_channels.values() else None
    message = p.message(
        posted.channel_id, p.bot_user(), posted.content, guild_id=guild, message_id=posted.id
    )
    message["edited_timestamp"] = p.now_iso()
    await fake.gateway.dispatch("MESSAGE_UPDATE", message)
    return message


async def _delete_message(fake: FakeDiscord, call: DiscordCall) -> Any:
    async with fake.changed:
        fake.messages.pop(call.params["message_id"], None)
        fake.changed.notify_all()
    return None


async def _no_content(fake: FakeDiscord, call: DiscordCall) -> Any:
    return None


async def _start_thread(fake: FakeDiscord, call: DiscordCall) -> Any:
    thread_id = call.params["message_id"]  # a thread started from a message shares its id
    if thread_id in fake.threads:
        return json_answer(
            {"message": "A thread has already been created for this message", "code": 160004},
            status=400,
        )
    name = str(call.body.get("name") or "thread")
    thread = p.thread(thread_id, call.params["channel_id"], name, p.BOT_ID)
    fake.threads[thread_id] = thread
    await fake.gateway.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
    return thread


async def _get_commands(fake: FakeDiscord, call: DiscordCall) -> Any:
    return fake.commands


async def _put_commands(fake: FakeDiscord, call: DiscordCall) -> Any:
    body: Any = call.body
    listed = body if isinstance(body, list) else []
    fake.commands = [
        {**command, "id": p.snowflake(), "application_id": p.APP_ID, "version": p.snowflake()}
        for command in listed
    ]
    return fake.commands


async def _upsert_command(fake: FakeDiscord, call: DiscordCall) -> Any:
    command = {
        **call.body,
        "id": p.snowflake(),
        "application_id": p.APP_ID,
        "version": p.snowflake(),
    }
    fake.commands = [c for c in fake.commands if c["name"] != command["name"]] + [command]
    return command


async def _interaction_callback(fake: FakeDiscord, call: DiscordCall) -> Any:
    return {
        "interaction": {"id": call.params["interaction_id"], "type": 2},  # (or 3: a button's)
        "resource": {"type": call.body.get("type", 5)},
    }


async def _webhook_edit(fake: FakeDiscord, call: DiscordCall) -> Any:
    content = str(call.body.get("content") or "")
    return p.message(p.CHANNEL_ID, p.bot_user(), content)


HANDLERS: dict[str, Any] = {
    "GET /users/@me": _me,
    "GET /oauth2/applications/@me": _application,
    "GET /gateway/bot": _gateway_bot,
    "GET /channels/{channel_id}": _channel,
    "POST /users/@me/channels": _open_dm,
    "POST /channels/{channel_id}/messages": _create_message,
    "PATCH /channels/{channel_id}/messages/{message_id}": _edit_message,
    "DELETE /channels/{channel_id}/messages/{message_id}": _delete_message,
    "POST /channels/{channel_id}/typing": _no_content,
    "PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me": _no_content,
    "DELETE /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me": _no_content,
    "POST /channels/{channel_id}/messages/{message_id}/threads": _start_thread,
    "GET /applications/{application_id}/commands": _get_commands,
    "PUT /applications/{application_id}/commands": _put_commands,
    "POST /applications/{application_id}/commands": _upsert_command,
    "POST /interactions/{interaction_id}/{token}/callback": _interaction_callback,
    "PATCH /webhooks/{application_id}/{token}/messages/@original": _webhook_edit,
    "DELETE /webhooks/{application_id}/{token}/messages/@original": _no_content,
    "POST /webhooks/{application_id}/{token}": _webhook_edit,
}
ROUTES = [tuple(route.split(" ", 1)) for route in HANDLERS]
