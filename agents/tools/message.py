"""`message {text, to?}`: send a message to a chat the daemon's policy allows.

For cron jobs, heartbeats and owner notices: the agent can write to the current chat, the
owner, or another chat it is allowed to reach, never to an arbitrary id. The tool only
checks its arguments; which targets exist and which are allowed is the `Messenger`'s
business (the daemon implements it). `to` defaults to `current`, the chat the run serves.
"""

from __future__ import annotations

from typing import Any, Protocol

from agents.tools.base import ToolContext, ToolError, ToolResult

MAX_MESSAGE_CHARS = 20_000

TARGET_FORMS = (
    "'current' (this run's chat), 'owner' (the owner's DM), '<channel>:<user id>' (an "
    "allowed or paired user's DM) or '<channel>:group:<group id>[:<thread id>]' (an allowed "
    "group)"
)


class Messenger(Protocol):
    """Delivers text to a named target, or refuses it.

    `origin` is the run's opaque chat address (`ToolContext.origin`), `requester` who wrote
    the message the run answers (`ToolContext.requester`). Returns a short
    description of where the text went; raises `ToolError` saying why a target is refused.
    """

    async def send(
        self,
        target: str,
        text: str,
        *,
        origin: str | None,
        session_key: str,
        requester: str | None = None,
    ) -> str: ...


class MessageTool:
    name = "message"
    description = (
        "Send a message to a chat now, apart from your reply: reminders, scheduled reports, "
        "notices to the owner. In a normal conversation just answer instead."
    )

    def __init__(self, messenger: Messenger) -> None:
        self.input_schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The message (Markdown)."},
                "to": {
                    "type": "string",
                    "description": "Where (default 'current'): " + TARGET_FORMS + "; other "
                    "chats are refused.",
                },
            },
            "required": ["text"],
        }
        self.messenger = messenger

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ToolError("message needs 'text': a non-empty string")
        if len(text) > MAX_MESSAGE_CHARS:
            raise ToolError(
                f"message text is {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}"
            )
        target = args.get("to", "current")
        if not isinstance(target, str):
            raise ToolError("message 'to' must be a string: " + TARGET_FORMS)
        where = await self.messenger.send(
            target.strip() or "current",
            text,
            origin=ctx.origin,
            session_key=ctx.session_key,
            requester=ctx.requester,
        )
        return ToolResult(f"Sent to {where}.")
