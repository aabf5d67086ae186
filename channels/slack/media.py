"""Slack media out: files through the external upload flow, reactions by emoji name.

`SlackMedia.send_file` uses slack_sdk's `files_upload_v2`, which is Slack's external upload
flow: `files.getUploadURLExternal`, the bytes posted to the returned URL, then
`files.completeUploadExternal` sharing the file in the chat (in the reply thread, with the
caption as its comment). Slack shows images inline itself, so there is no photo/document
split. Reactions (`reactions.add`/`reactions.remove`) take emoji *names*: common emoji are
translated, `:name:` passes through, anything else is refused with a hint.
"""

from __future__ import annotations

from collections.abc import Callable

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import ChatRef, OutboundFile, Refused
from channels.slack.text import slack_error_code

EMOJI_NAMES = {
    "👀": "eyes",
    "👍": "+1",
    "👎": "-1",
    "❤️": "heart",
    "❤": "heart",
    "🎉": "tada",
    "✅": "white_check_mark",
    "😂": "joy",
    "🙏": "pray",
    "🔥": "fire",
    "👌": "ok_hand",
    "😊": "blush",
    "🤔": "thinking_face",
    "😢": "cry",
    "😮": "open_mouth",
    "💯": "100",
    "⏳": "hourglass_flowing_sand",
    "👋": "wave",
    "🚀": "rocket",
    "⭐": "star",
    "✨": "sparkles",
    "🙂": "slightly_smiling_face",
    "😄": "smile",
    "👏": "clap",
    "💡": "bulb",
    "❌": "x",
    "⚠️": "warning",
}


def emoji_name(emoji: str) -> str | None:
    """Slack's name for an emoji (`:eyes:` or `eyes` kept as is), or None if unknown."""
    if emoji.startswith(":") and emoji.endswith(":") and len(emoji) > 2:
        return emoji[1:-1]
    if emoji.replace("_", "").replace("+", "").replace("-", "").isalnum() and emoji.isascii():
        return emoji
    return EMOJI_NAMES.get(emoji) or EMOJI_NAMES.get(emoji.replace("\ufe0f", ""))


class SlackMedia:
    """Files and reactions for one Slack app (see the module docstring)."""

    def __init__(self, client: AsyncWebClient, reply_thread: Callable[[ChatRef], str | None]):
        self._client = client
        self._reply_thread = reply_thread

    async def send_file(self, out: OutboundFile) -> None:
        """Upload and share a file; `Refused` with Slack's error code when it says no."""
        try:
            await self._client.files_upload_v2(
                channel=out.chat.chat_id,
                file=out.data,
                filename=out.name,
                title=out.name,
                initial_comment=out.caption or None,
                thread_ts=self._reply_thread(out.chat),
            )
        except SlackApiError as exc:
            raise Refused(f"Slack: {slack_error_code(exc) or 'error'}") from None
        except SlackClientError as exc:
            raise Refused(f"Slack: {type(exc).__name__}") from None

    async def react(
        self, chat: ChatRef, message_id: str, author: str, emoji: str, *, remove: bool = False
    ) -> None:
        name = emoji_name(emoji)
        if name is None:
            raise Refused(
                f"Slack reacts by emoji name and {emoji!r} has none known here; "
                "use :name: (e.g. :eyes:)"
            )
        try:
            if remove:
                await self._client.reactions_remove(
                    channel=chat.chat_id, timestamp=message_id, name=name
                )
            else:
                await self._client.reactions_add(
                    channel=chat.chat_id, timestamp=message_id, name=name
                )
        except SlackApiError as exc:
            code = slack_error_code(exc)
            if code in ("already_reacted", "no_reaction"):
                return
            raise Refused(f"Slack: {code or 'error'}") from None
