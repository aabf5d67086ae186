"""The soak's side of the fake wire (run in `bench.wire`'s process): waves of DMs, a model
that sometimes calls tools or rejects a request, and Bot API drops.

`SoakScenario.wave(users, texts, drop)` pushes one DM per user (texts[i] from users[i]),
optionally makes the next `getUpdates` fail with a 502 first (a platform drop: the adapter
must poll again and lose nothing), and answers once every user got a new `sendMessage` (an
answer or the plain-words notice of a refused request). The model answers a chat turn by
what its last user text asks for:

- `[tool]`: one `list_dir` call, then an echo of the tool's result;
- `[cron]`: one `cron` call adding a job every minute (cron runs then happen through the soak);
- `[reject]`: a 400 (`invalid_request_error`), a request refused for good;
- anything else, and every compaction or cron or heartbeat request: an echo.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tests.fakes.anthropic import FakeAnthropic, Reply, last_user_text
from tests.fakes.telegram import FakeTelegram

TIMEOUT_PER_DM = 0.5  # seconds of a wave's bound per DM (a loaded 2-core machine)


class SoakScenario:
    def __init__(
        self,
        telegram: FakeTelegram,
        model: FakeAnthropic,
        sent: Callable[[int], int],
        is_chat_turn: Callable[[dict[str, Any]], bool],
        until: Callable[[Callable[[], bool], float], Any],
    ) -> None:
        self.telegram = telegram
        self.model = model
        self.sent = sent  # how many sendMessages a chat has received so far
        self.is_chat_turn = is_chat_turn
        self.until = until
        self.counts = {"tool": 0, "cron": 0, "reject": 0, "echo": 0, "other": 0, "drops": 0}

    def reply(self, body: dict[str, Any]) -> Reply:
        """The model's answer to one request."""
        if not self.is_chat_turn(body):
            self.counts["other"] += 1
            return Reply.text("echo: " + last_user_text(body)[:200])
        if _last_is_tool_result(body):
            return Reply.text("done: the tool answered")
        text = last_user_text(body)
        if "[tool]" in text:
            self.counts["tool"] += 1
            return Reply.tool_use([("list_dir", {"path": "."})])
        if "[cron]" in text:
            self.counts["cron"] += 1
            job = {"action": "add", "name": "soak", "every": "1m", "message": "soak tick"}
            return Reply.tool_use([("cron", job)])
        if "[reject]" in text:
            self.counts["reject"] += 1
            return Reply.http_error(400, "invalid_request_error", "soak: this request is refused")
        self.counts["echo"] += 1
        return Reply.text("echo: " + text)

    async def wave(self, users: Sequence[int], texts: Sequence[str], drop: bool) -> dict[str, Any]:
        tg = self.telegram
        self.model.default = self.reply  # the soak's model from its first wave on
        if drop:
            tg.fail_next("getUpdates", 502)
            self.counts["drops"] += 1
        before = {user: self.sent(user) for user in users}
        for user, text in zip(users, texts, strict=True):
            tg.dm(text, user_id=user)

        def answered() -> bool:
            return all(self.sent(user) > count for user, count in before.items())

        await self.until(answered, 60 + TIMEOUT_PER_DM * len(users))
        return {"answered": len(users), "model": dict(self.counts)}


def _last_is_tool_result(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    if not messages:
        return False
    content = messages[-1].get("content")
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )
