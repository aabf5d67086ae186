"""Chat commands on every platform: an unknown /word answers with the list of commands."""

from __future__ import annotations

from pathlib import Path

from bot.hub.commands import HELP
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.chat import MemoryChannel
from tests.harness import running_daemon


async def test_unknown_slash_command_lists_the_commands_without_a_model_call(
    tmp_path: Path,
) -> None:
    chans = {name: MemoryChannel(name) for name in ("telegram", "slack", "signal")}
    overrides = {f"channels.{name}.allow_from": ["owner1"] for name in chans}
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, dict(chans), overrides):
        for chan in chans.values():
            await chan.say("/bogus now", chat_id="owner1")
            [reply] = await chan.wait_sent(1, timeout=30)
            assert reply == f"Unknown command /bogus.\n{HELP}"
            assert "/budget" in reply and "/help" in reply
        await chans["telegram"].say("/etc/hosts is odd", chat_id="owner1")
        texts = await chans["telegram"].wait_sent(2, timeout=30)
        assert texts[-1] == "echo: /etc/hosts is odd"  # not a command: a path
        assert len(fake.requests) == 1


async def test_unknown_command_from_a_stranger_still_gets_a_pairing_code(tmp_path: Path) -> None:
    chan = MemoryChannel("telegram")
    async with FakeAnthropic() as fake, running_daemon(tmp_path, fake, {"telegram": chan}):
        await chan.say("/start", chat_id="someone")
        [reply] = await chan.wait_sent(1, timeout=30)
        assert "pairing code" in reply and not fake.requests
