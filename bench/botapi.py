"""Benchmark 10: CPU per Bot API call, PTB's httpx request against Perch's aiohttp one.

The same `telegram.Bot` sends `sendChatAction` (a turn's typing call) and `sendMessage` to the
fake Bot API in the wire process: once over PTB's own `HTTPXRequest`, once over
`channels.telegram.request.AiohttpRequest` (what the Telegram channel uses). Calls run one
at a time and 8 at once (the run cap); the two transports alternate for 3 rounds, and each
figure is the median of its rounds, CPU time of this process per call.

    .venv/bin/python -m bench.botapi [--calls 1000] [--pin]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

from telegram import Bot
from telegram.request import BaseRequest, HTTPXRequest

from bench.report import Report, parser
from bench.wire import Wire, pin_apart, use_loopback
from channels.telegram.request import AiohttpRequest

ROUNDS = 3
AT_ONCE = 8
CHAT = 1001

TRANSPORTS: dict[str, Callable[[], BaseRequest]] = {
    "httpx (PTB's default)": lambda: HTTPXRequest(connection_pool_size=64),
    "aiohttp (Perch)": lambda: AiohttpRequest(connection_pool_size=64),
}


async def cpu_per_call(bot: Bot, calls: int, at_once: int, method: str) -> float:
    async def one(i: int) -> None:
        if method == "sendChatAction":
            await bot.send_chat_action(CHAT, "typing")
        else:
            await bot.send_message(CHAT, f"reply number {i}, a sentence or two long")

    async def worker(start: int) -> None:
        for i in range(start, calls, at_once):
            await one(i)

    cpu = time.process_time()
    await asyncio.gather(*(worker(k) for k in range(at_once)))
    return (time.process_time() - cpu) / calls * 1e6


async def main_async(calls: int) -> Report:
    report = Report("botapi", "10. CPU per Bot API call: PTB's httpx against Perch's aiohttp")
    runs: dict[tuple[str, str, int], list[float]] = {}
    async with Wire() as wire:
        for _ in range(ROUNDS):
            for name, make in TRANSPORTS.items():
                async with Bot(wire.token, base_url=wire.telegram_url, request=make()) as bot:
                    for method in ("sendChatAction", "sendMessage"):
                        await cpu_per_call(bot, 50, 1, method)  # warm: connections, caches
                        for at_once in (1, AT_ONCE):
                            cost = await cpu_per_call(bot, calls, at_once, method)
                            runs.setdefault((method, name, at_once), []).append(cost)
    for (method, name, at_once), costs in runs.items():
        how = "one at a time" if at_once == 1 else f"{at_once} at once"
        report.add(f"{method}, {how}: {name}", statistics.median(costs), "µs CPU/call")
    return report


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=1000, help="calls per measurement (1000)")
    p.add_argument("--pin", action="store_true", help="pin this process and the fakes apart")
    args = p.parse_args()
    use_loopback()
    if args.pin:
        print(pin_apart())
    report = asyncio.run(main_async(args.calls))
    report.save(args.json)


if __name__ == "__main__":
    main()
