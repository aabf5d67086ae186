"""The floor under Perch: the same wire path with no Perch at all, for comparison.

`BareBot` is python-telegram-bot receiving by long polling, the Anthropic SDK streaming a
one-message request, and python-telegram-bot sending the answer: no storage, no access
rules, no history, no system prompt, no typing indicator, at most 8 turns at once. Whatever
Perch measures above this is Perch's own cost; what this measures is the libraries' and the
fakes' cost on this machine.
"""

from __future__ import annotations

import asyncio
from typing import Any

from telegram import Update
from telegram.ext import Application, ContextTypes, TypeHandler

from bench.wire import Wire

MODEL = "claude-sonnet-5-5"


class BareBot:
    """Use as `async with BareBot(wire) as bot:`; `await bot.wait_idle()` after sending."""

    def __init__(self, wire: Wire, cap: int = 8) -> None:
        from anthropic import AsyncAnthropic

        self._client = AsyncAnthropic(
            api_key="test-key", base_url=wire.anthropic_url, max_retries=0
        )
        self._app: Application[Any, Any, Any, Any, Any, Any] = (
            Application.builder()
            .token(wire.token)
            .base_url(wire.telegram_url)
            .job_queue(None)
            .build()
        )
        self._app.add_handler(TypeHandler(Update, self._on_update, block=False))
        self._slots = asyncio.Semaphore(cap)
        self._busy = 0
        self._idle = asyncio.Event()
        self._idle.set()

    async def __aenter__(self) -> BareBot:
        await self._app.initialize()
        await self._app.start()
        assert self._app.updater is not None
        await self._app.updater.start_polling(timeout=30, allowed_updates=["message"])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._app.updater is not None
        await self._app.updater.stop()
        await self._app.stop()
        await self._app.shutdown()
        await self._client.close()

    async def wait_idle(self, timeout: float = 60) -> None:
        await asyncio.wait_for(self._idle.wait(), timeout)

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.message
        if message is None or not message.text:
            return
        self._busy += 1
        self._idle.clear()
        try:
            async with self._slots:
                messages: Any = [{"role": "user", "content": message.text}]
                async with self._client.messages.stream(
                    model=MODEL, max_tokens=1024, messages=messages
                ) as stream:
                    async for _event in stream:
                        pass
                    final = await stream.get_final_message()
                text = "".join(b.text for b in final.content if b.type == "text")
                await context.bot.send_message(message.chat_id, text)
        finally:
            self._busy -= 1
            if not self._busy:
                self._idle.set()
