"""The fake wire in a process of its own: Bot API and model fakes, driven over stdin/stdout.

`python -m bench.wire` serves the fake Telegram Bot API, the fake Anthropic API and the fake
OTLP trace collector of `tests/fakes/` on 127.0.0.1, prints their addresses as one JSON line, then runs one scenario
per JSON command read from stdin and answers each with one JSON line. Keeping the fakes here
keeps their CPU out of the process that measures Perch; `Wire` is the measuring side's handle.
Times are `time.monotonic()`, which on Linux is one clock for every process.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.soak_wire import SoakScenario
from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.otlp import FakeCollector
from tests.fakes.telegram import FakeTelegram

ROOT = Path(__file__).resolve().parent.parent
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
REPLY_METHODS = ("sendMessage", "editMessageText", "sendChatAction")
CHAT_PROMPT = "You are a personal assistant"  # how a chat turn's system prompt starts
FLOOD_TOKEN = re.compile(r"flood-\d{5}")
DROP_NOTICE = re.compile(r"dropped (\d+) older waiting message")
FLOOD_WAVE = 0.02  # seconds between the waves of a paced flood
FLOOD_QUIET = 3.0  # seconds without model calls or replies that end a flood


def use_loopback() -> dict[str, str]:
    """Make this process (and the returned child environment) talk to 127.0.0.1 directly."""
    for var in PROXY_VARS:
        os.environ.pop(var, None)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    os.environ["PTB_TIMEDELTA"] = "1"
    return dict(os.environ)


def pin_apart() -> str:
    """Pin this process (and threads it starts later) to the last CPU and the wire process to
    the others: steadier figures on a VM, where hand-offs between CPUs are costly."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return "not pinned: only one CPU is usable"
    os.sched_setaffinity(0, {cpus[-1]})
    os.environ["BENCH_WIRE_CPUS"] = ",".join(str(c) for c in cpus[:-1])
    return f"Perch pinned to CPU {cpus[-1]}, the fakes to CPU {os.environ['BENCH_WIRE_CPUS']}"


# ---------------------------------------------------------------------------------------------
# The fakes, instrumented


@dataclass(slots=True)
class ReplyCall:
    method: str
    at: float
    text: str


class BenchTelegram(FakeTelegram):
    """FakeTelegram that hands out at most `limit` updates per poll (as Telegram does),
    timestamps every update it hands out and every reply it receives, and waits in O(1)."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_at: dict[int, float] = {}
        self.replies: dict[int, list[ReplyCall]] = collections.defaultdict(list)
        self.first_send_at: dict[int, float] = {}
        self.sends: collections.Counter[int] = collections.Counter()  # sendMessages per chat
        self.api_calls: collections.Counter[str] = collections.Counter()
        self.changed = asyncio.Event()
        self.last_update_id = 0

    def push_update(self, update: dict[str, Any]) -> dict[str, Any]:
        pushed = super().push_update(update)
        self.last_update_id = int(pushed["update_id"])
        return pushed

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        updates = await super()._get_updates(params)
        given = updates[: int(params.get("limit") or 100)]
        now = time.monotonic()
        for update in given:
            self.handed_at.setdefault(update["update_id"], now)
        return given

    def _record(
        self, method: str, params: dict[str, Any], status: int, body: dict[str, Any]
    ) -> web.Response:
        if status != 200:
            return web.json_response({"ok": False, "error_code": status, **body}, status=status)
        self.api_calls[method] += 1
        if method in REPLY_METHODS:
            chat = int(params.get("chat_id", 0))
            now = time.monotonic()
            self.replies[chat].append(ReplyCall(method, now, str(params.get("text", ""))))
            if method == "sendMessage":
                self.first_send_at.setdefault(chat, now)
                self.sends[chat] += 1
            self.changed.set()
        return web.json_response({"ok": True, **body})

    async def until(self, done: Callable[[], bool], timeout: float) -> None:
        """Return once `done()` holds, re-checking after each reply; TimeoutError after
        `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while True:
                self.changed.clear()
                if done():
                    return
                await self.changed.wait()


class BenchModel(FakeAnthropic):
    """FakeAnthropic answering every request with an echo after `delay` seconds, counting
    how many chat turns (not compaction calls) it is answering at once."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = 0.0
        self.chat_in_flight = 0
        self.chat_max_in_flight = 0
        self.arrivals: list[float] = []  # when each request arrived
        self.default = self._echo

    async def __aenter__(self) -> BenchModel:
        await super().__aenter__()
        return self

    def _echo(self, body: dict[str, Any]) -> Reply:
        return Reply.text("echo: " + last_user_text(body), delay=self.delay)

    async def _answer(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        self.arrivals.append(time.monotonic())
        chat = is_chat_turn(body)
        if chat:
            self.chat_in_flight += 1
            self.chat_max_in_flight = max(self.chat_max_in_flight, self.chat_in_flight)
        try:
            return await super()._answer(request, body, reply)
        finally:
            if chat:
                self.chat_in_flight -= 1


def is_chat_turn(body: dict[str, Any]) -> bool:
    system = body.get("system")
    first = system[0].get("text", "") if isinstance(system, list) and system else ""
    return str(first).startswith(CHAT_PROMPT)


# ---------------------------------------------------------------------------------------------
# The scenarios (run in the wire process)


@dataclass(slots=True)
class _TurnRecord:
    update_id: int
    chat: int
    first_reply: int  # index into the chat's replies where this turn's replies start


@dataclass
class Scenarios:
    telegram: BenchTelegram
    model: BenchModel
    collector: FakeCollector
    open_turns: list[_TurnRecord] = field(default_factory=list)
    closed_turns: list[dict[str, float]] = field(default_factory=list)
    _users: itertools.count[int] = field(default_factory=lambda: itertools.count(10_000_000))

    async def ping(self) -> dict[str, Any]:
        return {}

    async def spans(self) -> dict[str, Any]:
        """How many spans the collector has received (and in how many exports)."""
        return {"spans": len(self.collector.spans), "exports": self.collector.requests}

    async def set_model(self, delay: float) -> dict[str, Any]:
        self.model.delay = delay
        return {}

    async def dm(self, user: int, text: str, timeout: float = 30) -> dict[str, Any]:
        """Push one DM and answer once its first `sendMessage` arrived."""
        self._close_turns()
        tg = self.telegram
        replies = tg.replies[user]
        start = len(replies)
        tg.dm(text, user_id=user)
        self.open_turns.append(_TurnRecord(tg.last_update_id, user, start))

        def answered() -> bool:
            return any(r.method == "sendMessage" for r in replies[start:])

        await tg.until(answered, timeout)
        return {}

    async def turns(self) -> dict[str, Any]:
        """Per-turn latencies of the `dm` scenario so far (then forgotten), in ms from the
        update's hand-out: to the model request, the typing action, the first `sendMessage`
        and the turn's last reply call."""
        self._close_turns()
        closed, self.closed_turns = self.closed_turns, []
        return {"turns": closed, "api_calls": dict(self.telegram.api_calls)}

    def _close_turns(self) -> None:
        tg = self.telegram
        for record in self.open_turns:
            handed = tg.handed_at[record.update_id]
            calls = tg.replies[record.chat][record.first_reply :]
            send = next(c.at for c in calls if c.method == "sendMessage")
            typing = next((c.at for c in calls if c.method == "sendChatAction"), send)
            last = [c.at for c in calls if c.method != "sendChatAction"][-1]
            arrivals = self.model.arrivals
            at = bisect.bisect_left(arrivals, handed)
            model = arrivals[at] if at < len(arrivals) else send
            self.closed_turns.append(
                {
                    "handed_at": handed,
                    "to_model_ms": (model - handed) * 1000,
                    "to_typing_ms": (typing - handed) * 1000,
                    "to_send_ms": (send - handed) * 1000,
                    "to_last_ms": (last - handed) * 1000,
                }
            )
        self.open_turns.clear()

    async def burst(self, n: int) -> dict[str, Any]:
        """`n` DMs from `n` new users at once; answer when every chat got a `sendMessage`."""
        tg, model = self.telegram, self.model
        model.chat_max_in_flight = 0
        users = [next(self._users) for _ in range(n)]
        requests_before = len(model.requests)
        pushed_at = time.monotonic()
        for i, user in enumerate(users):
            tg.dm(f"hello {i}", user_id=user)
        first_send = tg.first_send_at
        await tg.until(
            lambda: all(u in first_send for u in users), timeout=120 + n * (model.delay + 0.05)
        )
        return {
            "pushed_at": pushed_at,
            "last_send_at": max(first_send[u] for u in users),
            "answered": sum(1 for u in users if u in first_send),
            "model_requests": len(model.requests) - requests_before,
            "model_max_in_flight": model.chat_max_in_flight,
        }

    async def flood(self, chat: int, n: int, rate: float) -> dict[str, Any]:
        """`n` mentions in group `chat`, `rate` per second (0: all at once). Answers once every
        message reached the model (alone or collected with others) or was dropped with a
        notice, and every chat turn was answered."""
        tg, model = self.telegram, self.model
        model.chat_max_in_flight = 0
        replies = tg.replies[chat]
        start_reply, start_request = len(replies), len(model.requests)
        tokens = [f"flood-{i:05d}" for i in range(n)]
        wave = n if rate <= 0 else max(1, round(rate * FLOOD_WAVE))
        stops: list[float] = []
        probe = asyncio.create_task(self._stop_probe(stops))
        started = time.monotonic()
        for first in range(0, n, wave):
            for i, token in enumerate(tokens[first : first + wave], start=first):
                tg.group_message(f"question {token}", chat_id=chat, mention=True, user_id=1 + i % 7)
            if rate > 0 and first + wave < n:
                await asyncio.sleep(max(0.0, started + (first + wave) / rate - time.monotonic()))
        pushed = time.monotonic()

        def tally() -> _FloodTally:
            return _FloodTally.of(model.requests[start_request:], replies[start_reply:])

        def accounted() -> bool:
            now = tally()
            return len(now.tokens) + now.dropped >= n and now.echoes >= now.turns

        # The gateway's drop notice no longer says how many it dropped (one notice per
        # burst of drops): the flood is over once every turn was answered and nothing new
        # reached the model or the chat for QUIET seconds; the daemon's side then counts
        # the dropped messages in its inbox (bench.group_flood).
        deadline = time.monotonic() + 120 + n * (model.delay + 0.05)
        seen = (-1, -1)
        quiet_since = settled = time.monotonic()
        try:
            while not accounted() and time.monotonic() < deadline:
                now = (len(model.requests), len(replies))
                if now != seen:
                    seen, quiet_since = now, time.monotonic()
                elif (
                    time.monotonic() - quiet_since > FLOOD_QUIET
                    and tally().echoes >= tally().turns
                    and model.in_flight == 0
                ):
                    settled = quiet_since  # the last model call or reply
                    break
                await asyncio.sleep(0.05)
        finally:
            probe.cancel()
            if accounted():
                settled = time.monotonic()
        final = tally()
        stops.sort()
        return {
            "messages": n,
            "push_s": pushed - started,
            "done_s": settled - started,
            "turns": final.turns,
            "alone": final.alone,
            "collected": final.collected,
            "dropped_with_notice": final.dropped,
            "drop_notices": final.notices,
            "reached_model": len(final.tokens),
            "lost": n - len(final.tokens) - final.dropped,
            "answered_twice": final.duplicates,
            "replies": final.echoes,
            "model_max_in_flight": model.chat_max_in_flight,
            "other_model_calls": final.other_calls,
            "stop_probes": len(stops),
            "stop_p50_ms": stops[len(stops) // 2] if stops else float("nan"),
            "stop_p99_ms": stops[min(len(stops) - 1, int(len(stops) * 0.99))]
            if stops
            else float("nan"),
            "stop_max_ms": stops[-1] if stops else float("nan"),
        }

    async def _stop_probe(self, latencies: list[float], every: float = 0.05) -> None:
        """While a flood runs: `/stop` in a DM of another user, again and again; each one's
        time from its update's hand-out to the answer's `sendMessage`, in ms."""
        tg = self.telegram
        user = 4_000_000
        replies = tg.replies[user]
        while True:
            start = len(replies)
            tg.dm("/stop", user_id=user)
            update = tg.last_update_id

            def answered(start: int = start) -> bool:
                return any(r.method == "sendMessage" for r in replies[start:])

            await tg.until(answered, 60)
            send = next(r.at for r in replies[start:] if r.method == "sendMessage")
            latencies.append((send - tg.handed_at[update]) * 1000)
            await asyncio.sleep(every)


@dataclass(slots=True)
class _FloodTally:
    tokens: set[str] = field(default_factory=set)
    alone: int = 0
    collected: int = 0
    duplicates: int = 0
    turns: int = 0
    other_calls: int = 0
    dropped: int = 0
    notices: int = 0
    echoes: int = 0

    @classmethod
    def of(cls, requests: list[dict[str, Any]], replies: list[ReplyCall]) -> _FloodTally:
        """Which flood messages reached the model (alone or collected), which were dropped."""
        fresh = cls()
        for body in requests:
            if not is_chat_turn(body):
                fresh.other_calls += 1
                continue
            fresh.turns += 1
            found = FLOOD_TOKEN.findall(last_user_text(body))
            for token in found:
                if token in fresh.tokens:
                    fresh.duplicates += 1
                fresh.tokens.add(token)
            if len(found) == 1:
                fresh.alone += 1
            else:
                fresh.collected += len(found)
        for call in replies:
            if call.method != "sendMessage":
                continue
            notice = DROP_NOTICE.search(call.text)
            if notice:
                fresh.dropped += int(notice.group(1))
                fresh.notices += 1
            elif call.text.startswith("echo:"):
                fresh.echoes += 1
        return fresh


async def serve() -> None:
    use_loopback()
    cpus = os.environ.get("BENCH_WIRE_CPUS")
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    telegram = BenchTelegram()
    await telegram.start()
    async with BenchModel() as model, FakeCollector() as collector:
        scenarios = Scenarios(telegram, model, collector)
        soak = SoakScenario(
            telegram, model, telegram.sends.__getitem__, is_chat_turn, telegram.until
        )
        handlers: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
            "ping": scenarios.ping,
            "model": scenarios.set_model,
            "dm": scenarios.dm,
            "turns": scenarios.turns,
            "burst": scenarios.burst,
            "flood": scenarios.flood,
            "spans": scenarios.spans,
            "soak": soak.wave,
        }

        _answer(
            {
                "telegram": telegram.base_url,
                "token": telegram.token,
                "bot": telegram.username,
                "anthropic": model.base_url,
                "collector": collector.url,
            }
        )
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            command = json.loads(line)
            op = command.pop("op")
            cpu = time.process_time()
            try:
                result = await handlers[op](**command)
            except Exception as exc:  # report it to the measuring side, keep serving
                result = {"error": f"{op}: {type(exc).__name__}: {exc}"}
            result["wire_cpu_s"] = time.process_time() - cpu
            result["wire_cpu_total"] = time.process_time()
            _answer(result)
    await telegram.stop()


def _answer(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# The measuring side


class WireError(RuntimeError):
    """The wire process failed a scenario or went away; the text says which and why."""


class Wire:
    """A running `python -m bench.wire`. Use as `async with Wire() as wire:`."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None
        self.telegram_url = ""
        self.anthropic_url = ""
        self.collector_url = ""  # an OTLP/HTTP trace collector (base URL)
        self.token = ""
        self.bot = ""

    async def __aenter__(self) -> Wire:
        env = use_loopback()
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.wire",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env, cwd=ROOT,
            limit=64 * 1024 * 1024,
        )  # fmt: skip
        info = await self._read(30)
        self.telegram_url = info["telegram"]
        self.anthropic_url = info["anthropic"]
        self.collector_url = info["collector"]
        self.token = info["token"]
        self.bot = info["bot"]
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()

    async def call(self, op: str, timeout: float = 600, **args: Any) -> dict[str, Any]:
        """Run scenario `op` in the wire process and return its answer."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None, "use `async with Wire()`"
        proc.stdin.write(json.dumps({"op": op, **args}).encode() + b"\n")
        await proc.stdin.drain()
        result = await self._read(timeout)
        if "error" in result:
            raise WireError(f"the fake wire failed: {result['error']}")
        return result

    async def _read(self, timeout: float) -> dict[str, Any]:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout)
        if not line:
            raise WireError(
                f"the fake wire process exited (code {proc.returncode}); see its stderr above"
            )
        data: dict[str, Any] = json.loads(line)
        return data


if __name__ == "__main__":
    asyncio.run(serve())
