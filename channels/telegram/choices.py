"""Telegram choice cards: an inline keyboard under a message, taps as `callback_query`.

A button's `callback_data` is `<card id>:<value>` (Telegram allows 64 bytes). A tap becomes an
`Inbound` with `choice` set (`read_tap`); `answer` calls `answerCallbackQuery` (the tapper's
spinner stops, with a short toast), and `settle` edits the card to the decision's text with
the keyboard gone.
"""

from __future__ import annotations

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from channels.base import ChatRef, Choice, ChoiceCard, Inbound
from channels.telegram.delivery import TelegramSender

MAX_CALLBACK_BYTES = 64
MAX_TOAST = 190  # answerCallbackQuery's text holds 200 characters


class TelegramChoices:
    def __init__(self, sender: TelegramSender, account: str) -> None:
        self._sender = sender
        self._account = account

    async def send(self, card: ChoiceCard) -> str:
        buttons = []
        for option in card.options:
            data = f"{card.card_id}:{option.value}"
            if len(data.encode()) > MAX_CALLBACK_BYTES:
                raise ValueError(f"choice {data!r} is over Telegram's 64 bytes of callback data")
            buttons.append(InlineKeyboardButton(option.label, callback_data=data))
        bot = self._sender.bot_app().bot
        chat = card.chat
        thread = int(chat.thread_id) if chat.thread_id else None
        keyboard = InlineKeyboardMarkup([buttons])

        async def post() -> str:
            message = await bot.send_message(
                chat.chat_id, card.text, reply_markup=keyboard, message_thread_id=thread
            )
            return str(message.message_id)

        return await self._sender.call("sendMessage", chat.chat_id, post)

    async def answer(self, choice: Choice, note: str) -> None:
        bot = self._sender.bot_app().bot
        await self._sender.call(
            "answerCallbackQuery",
            "",
            lambda: bot.answer_callback_query(choice.token, text=note[:MAX_TOAST] or None),
            retry=False,  # a tap's answer is worth a moment only
        )

    async def settle(self, chat: ChatRef, message_id: str, text: str) -> None:
        bot = self._sender.bot_app().bot
        await self._sender.call(
            "editMessageText",
            chat.chat_id,
            lambda: bot.edit_message_text(
                text, chat_id=chat.chat_id, message_id=int(message_id), reply_markup=None
            ),
        )

    def read_tap(self, query: CallbackQuery) -> Inbound | None:
        """The tap as an `Inbound`, or None when it is not on one of our cards."""
        data = query.data or ""
        card_id, sep, value = data.partition(":")
        message = query.message
        if not sep or message is None:
            return None
        chat = message.chat
        thread = getattr(message, "message_thread_id", None)
        ref = ChatRef(
            channel="telegram",
            account=self._account,
            kind="dm" if chat.type == "private" else "group",
            chat_id=str(chat.id),
            thread_id=str(thread) if thread else None,
        )
        return Inbound(
            chat=ref,
            sender_id=str(query.from_user.id),
            text="",
            message_id=f"tap-{query.id}",
            sender_name=query.from_user.full_name,
            choice=Choice(card_id, value, str(message.message_id), query.id),
        )
