"""A turn reads only the tail of a long session that its turn limit can use (issue 19), and
what it sends the model is exactly what reading the whole session would have given."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agents.history import prepare_history
from agents.model import Message, Usage
from bot.hub.turn_inputs import load_history, load_session
from bot.store.sqlite.store import SQLiteStore


def _user(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _tool_round(n: int) -> list[Message]:
    call: dict[str, Any] = {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {}}
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "x"}
    return [
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
    ]


# A run: the user's message, then some tool rounds, then (usually) the answer.
runs = st.lists(
    st.tuples(st.integers(0, 12), st.booleans()), min_size=0, max_size=40
).map(lambda specs: [
    [_user(f"u{i}"), *[m for k in range(rounds) for m in _tool_round(i * 100 + k)],
     *([_assistant(f"a{i}")] if answered else [])]
    for i, (rounds, answered) in enumerate(specs)
])  # fmt: skip


async def _compare(session_runs: list[list[Message]], max_turns: int) -> None:
    store = await SQLiteStore.open(":memory:")
    try:
        session = await store.session("telegram:dm:1")
        for run in session_runs:
            await store.save_run(session.id, session.key, run, usage=Usage())
        everything = await store.messages(session.id)
        tail, total = await load_history(store, session.id, max_turns)
        row, *read = await load_session(store, session.key, max_turns)
        assert row.id == session.id and read == [tail, total]
        assert total == len(everything)
        assert len(tail) <= len(everything)
        window = 1_000_000
        assert prepare_history(tail, max_turns=max_turns, context_window_tokens=window) == (
            prepare_history(everything, max_turns=max_turns, context_window_tokens=window)
        )
    finally:
        await store.close()


@settings(max_examples=60)
@given(session_runs=runs, max_turns=st.integers(0, 12))
def test_the_tail_gives_the_same_history_as_the_whole_session(
    session_runs: list[list[Message]], max_turns: int
) -> None:
    asyncio.run(_compare(session_runs, max_turns))


async def test_a_long_session_reads_a_bounded_tail() -> None:
    store = await SQLiteStore.open(":memory:")
    try:
        session = await store.session("telegram:dm:2")
        for i in range(2_500):  # 5,000 stored messages
            await store.save_run(
                session.id, session.key, [_user(f"u{i}"), _assistant(f"a{i}")], usage=Usage()
            )
        tail, total = await load_history(store, session.id, 50)
        assert total == 5_000
        assert len(tail) == 100  # the last 50 turns, not the whole session
        assert tail[0] == _user("u2450") and tail[-1] == _assistant("a2499")
    finally:
        await store.close()
