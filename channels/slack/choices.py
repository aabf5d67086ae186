"""Slack choice cards: Block Kit buttons, taps as `block_actions` interactive payloads.

A card is a `section` with the text and an `actions` block of buttons; each button's
`action_id` is `perch_choice:<value>` and its `value` the card id. Bolt delivers the tap over
Socket Mode (an `interactive` envelope) or HTTP mode (a signed `payload=` form post), acks
it, and `read_tap` makes it an `Inbound` with `choice` set. The card's message id is
`<channel>/<ts>` (a DM posted to a user id lands in a `D...` channel that `chat.update`
needs). The card's text is plain text (the blocks) and escaped (the notification's
fallback), so a command's `<!channel>` pings nobody. Slack shows no toast for a tap: `answer` posts the note as an ephemeral message only
the tapper sees; `settle` rewrites the card without its buttons.
"""

from __future__ import annotations

import re
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from channels.base import ChatRef, Choice, ChoiceCard, Inbound

ACTION_PREFIX = "perch_choice:"
ACTIONS = re.compile(r"^perch_choice:")
_STYLES = {"primary": "primary", "danger": "danger"}


def card_blocks(text: str, card: ChoiceCard | None = None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "plain_text", "text": text[:3000]}}
    ]
    if card is not None:
        buttons = []
        for option in card.options:
            button: dict[str, Any] = {
                "type": "button",
                "text": {"type": "plain_text", "text": option.label},
                "action_id": ACTION_PREFIX + option.value,
                "value": card.card_id,
            }
            if option.style in _STYLES:
                button["style"] = _STYLES[option.style]
            buttons.append(button)
        blocks.append(
            {"type": "actions", "block_id": f"perch_card_{card.card_id}", "elements": buttons}
        )
    return blocks


def _escaped(text: str) -> str:
    """The notification text as Slack reads it: `<!channel>` in a command stays text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SlackChoices:
    def __init__(self, client: AsyncWebClient, name: str) -> None:
        self._client = client
        self._name = name

    async def send(self, card: ChoiceCard) -> str:
        response = await self._client.chat_postMessage(
            channel=card.chat.chat_id, text=_escaped(card.text), blocks=card_blocks(card.text, card)
        )
        return f"{response['channel']}/{response['ts']}"

    async def answer(self, chat: ChatRef, choice: Choice, note: str) -> None:
        if note and choice.token:  # the tapper's user id
            channel = choice.message_id.partition("/")[0] or chat.chat_id
            await self._client.chat_postEphemeral(channel=channel, user=choice.token, text=note)

    async def settle(self, chat: ChatRef, message_id: str, text: str) -> None:
        channel, _, ts = message_id.partition("/")
        await self._client.chat_update(
            channel=channel, ts=ts, text=_escaped(text), blocks=card_blocks(text)
        )

    def read_tap(self, body: dict[str, Any], account: str) -> Inbound | None:
        """A `block_actions` payload as an `Inbound`, or None when it is not a card's tap."""
        actions = body.get("actions") or []
        user = (body.get("user") or {}).get("id")
        channel = (body.get("channel") or {}).get("id")
        ts = (body.get("container") or {}).get("message_ts") or (body.get("message") or {}).get(
            "ts"
        )
        if not actions or not user or not channel or not ts:
            return None
        action = actions[0]
        value = str(action.get("action_id", "")).removeprefix(ACTION_PREFIX)
        team = (body.get("team") or {}).get("id") or account
        chat = ChatRef(self._name, team, "dm" if channel.startswith("D") else "group", channel)
        return Inbound(
            chat=chat,
            sender_id=user,
            text="",
            message_id=f"tap-{action.get('action_ts', ts)}",
            sender_name=(body.get("user") or {}).get("name", ""),
            choice=Choice(str(action.get("value", "")), value, f"{channel}/{ts}", user),
        )
