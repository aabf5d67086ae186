"""Discord API objects as the real API serialises them, for the fake Discord.

Snowflakes, users, the bot's guild (one text channel, its roles, the bot as a member),
messages, threads, attachments and slash-command interactions: built with every field
discord.py reads, so the library parses them exactly as it parses Discord's.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from typing import Any

DISCORD_EPOCH_MS = 1_420_070_400_000
BOT_ID = "1100000000000000001"
APP_ID = BOT_ID  # a bot's application id is its user id
BOT_NAME = "perch"
GUILD_ID = "1200000000000000001"
CHANNEL_ID = "1300000000000000001"  # #general, on the allowlist in the tests
OTHER_CHANNEL_ID = "1300000000000000002"  # #random, not on it
BOT_ROLE_ID = "1400000000000000001"
TOKEN = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.GfAkEx.fake-signature-for-tests-0123456789"

_counter = itertools.count(1)

VOICE_MESSAGE_FLAG = 1 << 13
INTENT_MESSAGE_CONTENT = 1 << 15


def snowflake() -> str:
    """A fresh id with the current time in it, as Discord makes them."""
    ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
    return str((ms << 22) | (next(_counter) & 0x3FFFFF))


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id,
        "username": name,
        "discriminator": "0",
        "global_name": name.title(),
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


def bot_user() -> dict[str, Any]:
    return {**user(BOT_ID, BOT_NAME, bot=True), "verified": True, "flags": 0, "mfa_enabled": True}


def application() -> dict[str, Any]:
    return {
        "id": APP_ID,
        "name": "Perch",
        "icon": None,
        "description": "",
        "rpc_origins": [],
        "bot_public": False,
        "bot_require_code_grant": False,
        "owner": user("1500000000000000001", "owner"),
        "summary": "",
        "verify_key": "0" * 64,
        "team": None,
        "flags": 1 << 19,  # GATEWAY_MESSAGE_CONTENT_LIMITED: the intent is switched on
        "interactions_endpoint_url": None,
        "tags": [],
    }


def text_channel(channel_id: str, name: str) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": 0,
        "guild_id": GUILD_ID,
        "name": name,
        "position": 0,
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
        "topic": None,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "flags": 0,
    }


def thread(thread_id: str, parent_id: str, name: str, owner_id: str) -> dict[str, Any]:
    return {
        "id": thread_id,
        "type": 11,
        "guild_id": GUILD_ID,
        "parent_id": parent_id,
        "owner_id": owner_id,
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": now_iso(),
            "locked": False,
        },
    }


def guild(channels: list[dict[str, Any]], threads: list[dict[str, Any]]) -> dict[str, Any]:
    role = {
        "hoist": False,
        "icon": None,
        "unicode_emoji": None,
        "position": 0,
        "color": 0,
        "permissions": "0",
        "managed": False,
        "mentionable": False,
        "flags": 0,
    }
    return {
        "id": GUILD_ID,
        "name": "Fake Guild",
        "icon": None,
        "splash": None,
        "discovery_splash": None,
        "owner_id": "1500000000000000001",
        "afk_channel_id": None,
        "afk_timeout": 300,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "mfa_level": 0,
        "premium_tier": 0,
        "preferred_locale": "en-US",
        "system_channel_id": None,
        "system_channel_flags": 0,
        "nsfw_level": 0,
        "features": [],
        "emojis": [],
        "stickers": [],
        "roles": [
            {**role, "id": GUILD_ID, "name": "@everyone"},
            {
                **role,
                "id": BOT_ROLE_ID,
                "name": "Perch",
                "position": 1,
                "managed": True,
                "tags": {"bot_id": BOT_ID},
            },
        ],
        "joined_at": now_iso(),
        "large": False,
        "unavailable": False,
        "member_count": 3,
        "voice_states": [],
        "members": [
            {
                "user": bot_user(),
                "roles": [BOT_ROLE_ID],
                "joined_at": now_iso(),
                "deaf": False,
                "mute": False,
                "flags": 0,
            }
        ],
        "channels": channels,
        "threads": threads,
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
    }


def attachment(
    url: str, filename: str, data: bytes, content_type: str, **extra: Any
) -> dict[str, Any]:
    return {
        "id": snowflake(),
        "filename": filename,
        "size": len(data),
        "url": url,
        "proxy_url": url,
        "content_type": content_type,
        **extra,
    }


def message(
    channel_id: str,
    author: dict[str, Any],
    content: str,
    *,
    guild_id: str | None = None,
    message_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
    mention_roles: list[str] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    referenced: dict[str, Any] | None = None,
    flags: int = 0,
    kind: int | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A message object (the `d` of MESSAGE_CREATE, or a REST answer); `fields` set any
    other field (`mention_everyone=True`, `webhook_id=...`)."""
    payload: dict[str, Any] = {
        "id": message_id or snowflake(),
        "channel_id": channel_id,
        "author": author,
        "content": content,
        "timestamp": now_iso(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": mentions or [],
        "mention_roles": mention_roles or [],
        "attachments": attachments or [],
        "embeds": [],
        "pinned": False,
        "type": kind if kind is not None else (19 if referenced else 0),
        "flags": flags,
        "components": [],
    }
    if guild_id is not None:
        payload["guild_id"] = guild_id
        payload["member"] = {"roles": [], "joined_at": now_iso(), "deaf": False, "mute": False}
    if referenced is not None:
        payload["message_reference"] = {
            "type": 0,
            "message_id": referenced["id"],
            "channel_id": referenced["channel_id"],
            **({"guild_id": guild_id} if guild_id else {}),
        }
        payload["referenced_message"] = referenced
    payload.update(fields)
    return payload


def interaction(
    name: str,
    sender: dict[str, Any],
    channel: dict[str, Any],
    *,
    argument: str | None = None,
    guild_id: str | None = None,
) -> dict[str, Any]:
    """An application command interaction (the `d` of INTERACTION_CREATE)."""
    data: dict[str, Any] = {"id": snowflake(), "name": name, "type": 1}
    if argument is not None:
        data["options"] = [{"name": "args", "type": 3, "value": argument}]
    payload: dict[str, Any] = {
        "id": snowflake(),
        "application_id": APP_ID,
        "type": 2,
        "data": data,
        "channel_id": channel["id"],
        "channel": channel,
        "token": "interaction-token-" + snowflake(),
        "version": 1,
        "app_permissions": "2248473465835073",
        "locale": "en-US",
        "entitlements": [],
        "authorizing_integration_owners": {"0": GUILD_ID} if guild_id else {"1": sender["id"]},
        "context": 0 if guild_id else 1,
        "attachment_size_limit": 10_485_760,
    }
    if guild_id is not None:
        payload["guild_id"] = guild_id
        payload["guild_locale"] = "en-US"
        payload["member"] = {
            "user": sender,
            "roles": [],
            "joined_at": now_iso(),
            "deaf": False,
            "mute": False,
            "permissions": "2248473465835073",
            "flags": 0,
        }
    else:
        payload["user"] = sender
    return payload


ALICE = user("1600000000000000001", "alice")
BOB = user("1600000000000000002", "bob")
OTHER_BOT = user("1600000000000000009", "otherbot", bot=True)
