"""Discord slash commands: registered at start, each use turned into the same command text.

`SlashCommands.register` makes sure each name in `slash_commands` exists as a global command
of the bot's application (created or updated one by one, so commands of other tools stay;
nothing is registered when the application sends interactions to an HTTP endpoint, or when
Discord refuses, which is logged: the text commands work all the same). Each command has one
optional string option, `args`, for what follows it (`/model args:local/qwen3`).

`on_interaction` acknowledges a use at once ("thinking...", within Discord's 3 s) and hands
on an `Inbound` whose text is `/<name> <args>`, addressed to the bot, with the message id
`interaction:<id>`. The answer the daemon sends to that chat replaces the "thinking..."
(`answer`); if none comes within `interaction_timeout` (the sender may not use commands
here), the acknowledgement is deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import discord

from channels.background import Spawn
from channels.base import ChatRef, Inbound
from channels.discord.delivery import NO_PINGS, DiscordDelivery, DiscordDeliveryError
from channels.discord.inbound import DiscordInbound
from channels.discord.options import DiscordOptions

log = logging.getLogger("channels.discord")

PREFIX = "interaction:"
DESCRIPTIONS = {
    "stop": "Stop the oldest reply in progress here",
    "stopall": "Stop every reply in progress here and drop waiting messages",
    "status": "Model, usage and what is running",
    "model": "List models, or switch this chat's model (args: provider/model)",
    "help": "List the commands",
    "new": "Start a fresh conversation (the old one is archived)",
    "reset": "Clear this conversation's history",
    "compact": "Summarise the conversation now to free context",
    "budget": "Today's spend against the daily budget",
}


def command_definition(name: str) -> dict[str, Any]:
    """The application command Perch registers for `/name`."""
    return {
        "name": name,
        "type": 1,
        "description": DESCRIPTIONS.get(name, f"Perch /{name}"),
        "options": [
            {
                "type": 3,
                "name": "args",
                "description": "What follows the command, if anything",
                "required": False,
            }
        ],
        "contexts": [0, 1],  # guild channels and the bot's DMs
        "integration_types": [0],
    }


def _same(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    options = [(o.get("name"), o.get("type")) for o in existing.get("options") or []]
    return existing.get("description") == wanted["description"] and options == [("args", 3)]


class SlashCommands:
    """Registration and handling of the bot's slash commands (see the module docstring)."""

    def __init__(
        self,
        options: DiscordOptions,
        delivery: DiscordDelivery,
        inbound: DiscordInbound,
        spawn: Spawn,
    ) -> None:
        self._options = options
        self._delivery = delivery
        self._inbound = inbound
        self._spawn = spawn
        self._pending: dict[str, discord.Interaction] = {}

    async def register(self, client: discord.Client) -> None:
        """Create or update the configured commands; a refusal is logged, never raised."""
        names = self._options.slash_commands
        application = client.application
        if not names or application is None:
            return
        if application.interactions_endpoint_url:
            log.info(
                "discord: the application sends interactions to %s, so Perch registers no "
                "slash commands; the text commands work",
                application.interactions_endpoint_url,
            )
            return
        try:
            existing = {
                str(c.get("name")): c
                for c in await self._delivery.call(
                    "list the slash commands of",
                    "the application",
                    lambda: client.http.get_global_commands(application.id),
                )
            }
            for name in names:
                wanted = command_definition(name)
                if name in existing and _same(dict(existing[name]), wanted):
                    continue
                await self._delivery.call(
                    f"register /{name} for",
                    "the application",
                    lambda wanted=wanted: client.http.upsert_global_command(  # type: ignore[misc]
                        application.id, wanted
                    ),
                )
        except DiscordDeliveryError as exc:
            log.warning(
                "discord: slash commands not registered (%s); text commands still work", exc
            )
            return
        log.info("discord: slash commands ready: %s", ", ".join(f"/{n}" for n in names))

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """discord.py's `on_interaction`: one of our commands becomes an Inbound."""
        if interaction.type is not discord.InteractionType.application_command:
            return
        data: Any = interaction.data or {}
        name = str(data.get("name") or "")
        if name not in self._options.slash_commands:
            return
        argument = " ".join(
            str(option.get("value") or "")
            for option in data.get("options") or []
            if option.get("name") == "args"
        )
        message_id = f"{PREFIX}{interaction.id}"
        try:
            await interaction.response.defer(thinking=True)
            self._pending[message_id] = interaction
            self._spawn(self._expire(message_id), f"discord-interaction-{interaction.id}")
        except discord.HTTPException as exc:
            log.warning("discord: could not acknowledge /%s (%s); answering in the chat", name, exc)
        chat = await self._chat(interaction, message_id)
        inbound = Inbound(
            chat=chat,
            sender_id=str(interaction.user.id),
            text=f"/{name} {argument}".strip(),
            message_id=message_id,
            sender_name=interaction.user.display_name,
            mentioned=True,
        )
        await self._inbound.hand_on(inbound, str(interaction.channel_id))

    async def _chat(self, interaction: discord.Interaction, message_id: str) -> ChatRef:
        account = self._inbound.account
        user = str(interaction.user.id)
        channel_id = interaction.channel_id or 0
        if interaction.guild_id is None:
            if channel_id:
                self._delivery.remember_dm(user, channel_id)
            return ChatRef("discord", account, "dm", user, None, message_id)
        client = self._delivery.client()
        parent = await self._inbound.parent_of(client, interaction.channel)
        if parent is not None:
            return ChatRef("discord", account, "group", str(parent), str(channel_id), message_id)
        return ChatRef("discord", account, "group", str(channel_id), None, message_id)

    def take(self, chat: ChatRef) -> discord.Interaction | None:
        """The acknowledged interaction an answer to `chat` completes, if any."""
        if chat.reply_to is None or not chat.reply_to.startswith(PREFIX):
            return None
        return self._pending.pop(chat.reply_to, None)

    async def answer(self, interaction: discord.Interaction, chunks: Sequence[str]) -> bool:
        """Replace the "thinking..." with the answer; False if Discord no longer takes it."""
        try:
            await interaction.edit_original_response(content=chunks[0], allowed_mentions=NO_PINGS)
            for chunk in chunks[1:]:
                await interaction.followup.send(chunk, allowed_mentions=NO_PINGS)
        except discord.HTTPException as exc:
            log.warning("discord: answering the interaction failed (%s); posting instead", exc)
            return False
        return True

    async def _expire(self, message_id: str) -> None:
        await asyncio.sleep(self._options.interaction_timeout)
        interaction = self._pending.pop(message_id, None)
        if interaction is None:
            return
        try:
            await interaction.delete_original_response()
        except discord.HTTPException as exc:
            log.debug("discord: could not withdraw an unanswered interaction: %s", exc)
