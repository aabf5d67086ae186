"""Discord choice cards: a message with buttons (message components), taps as component
interactions.

Each button's `custom_id` is `perch_choice:<card id>:<value>`. The view that carries them is
stopped right after sending, so discord.py's view store never claims the taps: they reach
`on_interaction` like slash commands do. `read_tap` acknowledges a tap at once (Discord wants
an answer within 3 s: a deferred message update) and makes it an `Inbound` with `choice` set;
`answer` sends the note as an ephemeral follow-up only the tapper sees; `settle` edits the
card to the decision's text with its buttons removed.
"""

from __future__ import annotations

import logging
from typing import Any

import discord

from channels.base import ChatRef, Choice, ChoiceCard, Inbound
from channels.discord.delivery import NO_PINGS, DiscordDelivery

log = logging.getLogger("channels.discord")

PREFIX = "perch_choice:"
_STYLES = {
    "primary": discord.ButtonStyle.success,
    "danger": discord.ButtonStyle.danger,
    "default": discord.ButtonStyle.secondary,
}
MAX_TAPS = 256  # taps waiting for their answer, oldest forgotten first


class DiscordChoices:
    def __init__(self, delivery: DiscordDelivery) -> None:
        self._delivery = delivery
        self._taps: dict[str, discord.Interaction] = {}

    async def send(self, card: ChoiceCard) -> str:
        target = await self._delivery.target(card.chat)
        view = discord.ui.View(timeout=None)
        for option in card.options:
            custom_id = f"{PREFIX}{card.card_id}:{option.value}"
            view.add_item(
                discord.ui.Button(
                    label=option.label, style=_STYLES[option.style], custom_id=custom_id
                )
            )
        message = await self._delivery.call(
            "send a choice card to",
            card.chat,
            lambda: target.send(card.text, view=view, allowed_mentions=NO_PINGS),
        )
        view.stop()  # taps come through on_interaction, not the view store
        return str(message.id)

    async def read_tap(self, interaction: discord.Interaction, account: str) -> Inbound | None:
        """A tap on one of our buttons as an `Inbound` (acknowledged), else None."""
        if interaction.type is not discord.InteractionType.component:
            return None
        data: Any = interaction.data or {}
        custom_id = str(data.get("custom_id") or "")
        if not custom_id.startswith(PREFIX) or interaction.message is None:
            return None
        card_id, _, value = custom_id.removeprefix(PREFIX).partition(":")
        try:
            await interaction.response.defer()
        except discord.HTTPException as exc:
            log.warning("discord: could not acknowledge a button tap (%s)", exc)
        token = str(interaction.id)
        self._taps[token] = interaction
        while len(self._taps) > MAX_TAPS:
            del self._taps[next(iter(self._taps))]
        user = str(interaction.user.id)
        channel_id = interaction.channel_id or 0
        if interaction.guild_id is None:
            if channel_id:
                self._delivery.remember_dm(user, channel_id)
            chat = ChatRef("discord", account, "dm", user)
        else:
            chat = ChatRef("discord", account, "group", str(channel_id))
        return Inbound(
            chat=chat,
            sender_id=user,
            text="",
            message_id=f"tap:{interaction.id}",
            sender_name=interaction.user.display_name,
            choice=Choice(card_id, value, str(interaction.message.id), token),
        )

    async def answer(self, choice: Choice, note: str) -> None:
        interaction = self._taps.pop(choice.token, None)
        if interaction is None or not note:
            return
        await interaction.followup.send(note, ephemeral=True, allowed_mentions=NO_PINGS)

    async def settle(self, chat: ChatRef, message_id: str, text: str) -> None:
        target = await self._delivery.target(chat)
        message = target.get_partial_message(int(message_id))
        await self._delivery.call(
            "edit a choice card in", chat, lambda: message.edit(content=text, view=None)
        )
