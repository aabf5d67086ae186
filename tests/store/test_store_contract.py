"""The `Store` contract: every backend behind `bot.store.Store` must pass this file unchanged.

Written against the protocol only (`open_store` + its methods); the `backend` fixture
(tests/store_backends.py) gives each test a fresh, empty store of each kind: an SQLite file,
and a database on a throwaway PostgreSQL server when the machine has its binaries.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agents.model import Message, Usage
from bot.store.roles import Store
from bot.store.rows import (
    COPY_COLUMNS,
    INBOX_LEASE,
    AlreadyRunning,
    CronJobRow,
    CronRun,
    InstanceRow,
    PairingRequest,
)
from bot.store.search_rows import SearchDocument, SearchHit, SearchQuery, SearchSource
from tests.store_backends import Backend


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    s = await backend.open()
    try:
        yield s
    finally:
        await s.close()


def user(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


USAGE = Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2, cache_write_tokens=1)


# -- schema ------------------------------------------------------------------------------


async def test_a_new_store_is_migrated_and_writable(store: Store) -> None:
    assert await store.schema_version() == store.latest_schema >= 1
    await store.check_writable()
    assert store.location


async def test_data_survives_closing_and_reopening(backend: Backend) -> None:
    first = await backend.open()
    session = await first.session("agent:main:k")
    await first.save_run(session.id, session.key, [user("kept")], usage=USAGE)
    await first.close()
    second = await backend.open()
    try:
        assert await second.schema_version() == second.latest_schema
        again = await second.session("agent:main:k")
        assert again.id == session.id
        assert await second.messages(again.id) == [user("kept")]
    finally:
        await second.close()


# -- sessions and history ----------------------------------------------------------------


async def test_a_session_is_created_on_first_use_and_found_afterwards(store: Store) -> None:
    assert await store.find_session("agent:main:a") is None
    created = await store.session("agent:main:a")
    assert created.key == "agent:main:a"
    assert (created.summary, created.compactions, created.input_tokens, created.origin) == (
        "",
        0,
        0,
        "",
    )
    assert (await store.session("agent:main:a")).id == created.id
    found = await store.find_session("agent:main:a")
    assert found is not None and found.id == created.id


async def test_concurrent_first_use_makes_one_session(store: Store) -> None:
    rows = await asyncio.gather(*(store.session("agent:main:race") for _ in range(8)))
    assert len({r.id for r in rows}) == 1


async def test_messages_round_trip_in_order_with_their_blocks(store: Store) -> None:
    session = await store.session("agent:main:m")
    tool_turn: list[Message] = [
        user("héllo ✓ 🦜"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "let me look"},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "x", "is_error": False}
            ],
        },
        assistant("done"),
    ]
    await store.save_run(session.id, session.key, tool_turn, usage=USAGE, run_id="r1")
    assert await store.messages(session.id) == tool_turn
    with_ids = await store.messages_with_ids(session.id)
    assert [m for _, m in with_ids] == tool_turn
    ids = [i for i, _ in with_ids]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert await store.count_messages(session.id) == 4


async def test_save_run_adds_totals_and_one_ledger_row(store: Store) -> None:
    session = await store.session("agent:main:u")
    before = time.time() - 1
    await store.save_run(
        session.id,
        session.key,
        [user("q"), assistant("a")],
        usage=Usage(10, 5, 2, 1, 0.25),
        run_id="r1",
        model="m1",
        context_tokens=123,
        origin='{"c":1}',
    )
    await store.save_run(
        session.id, session.key, [user("q2")], usage=Usage(1, 1, 0, 0, 0.5), run_id="r2"
    )
    row = await store.session(session.key)
    assert (row.input_tokens, row.output_tokens, row.cache_read_tokens) == (11, 6, 2)
    assert row.cache_write_tokens == 1
    assert row.cost_usd == pytest.approx(0.75)
    assert row.model == "m1"  # an empty model keeps the last one
    assert row.context_tokens == 123  # None keeps the value
    assert row.origin == '{"c":1}'
    assert row.updated_at >= row.created_at
    total = await store.usage_since(before)
    assert (total.input_tokens, total.output_tokens, total.cost_usd) == (11, 6, pytest.approx(0.75))
    assert (await store.usage_since(time.time() + 60)).input_tokens == 0


async def test_a_run_without_usage_writes_no_ledger_row(store: Store) -> None:
    session = await store.session("agent:main:free")
    before = time.time() - 1
    await store.save_run(session.id, session.key, [user("q")], usage=Usage())
    assert await store.usage_since(before) == Usage()
    assert await store.count_messages(session.id) == 1


async def test_a_run_that_fails_to_save_leaves_nothing_behind(store: Store) -> None:
    session = await store.session("agent:main:atomic")
    await store.save_run(session.id, session.key, [user("first")], usage=USAGE, run_id="r1")
    bad: Message = {"role": "system", "content": [{"type": "text", "text": "not a role"}]}
    before = time.time() - 1
    with pytest.raises(Exception):  # noqa: B017 (each backend raises its own error type)
        await store.save_run(
            session.id, session.key, [user("second"), bad], usage=USAGE, run_id="r2"
        )
    assert await store.messages(session.id) == [user("first")]
    assert (await store.session(session.key)).input_tokens == USAGE.input_tokens
    assert (await store.usage_since(before)).input_tokens == USAGE.input_tokens
    # the store still works after the failed transaction
    await store.save_run(session.id, session.key, [user("third")], usage=Usage(), run_id="r3")
    assert await store.count_messages(session.id) == 2


async def test_concurrent_runs_never_interleave(store: Store) -> None:
    session = await store.session("agent:main:group")

    async def run(n: int) -> None:
        msgs = [user(f"{n}-q"), assistant(f"{n}-a"), user(f"{n}-r")]
        await store.save_run(session.id, session.key, msgs, usage=Usage(1), run_id=f"r{n}")

    await asyncio.gather(*(run(n) for n in range(12)))
    texts = [m["content"][0]["text"] for m in await store.messages(session.id)]
    assert len(texts) == 36
    for start in range(0, 36, 3):
        n = texts[start].split("-")[0]
        assert texts[start : start + 3] == [f"{n}-q", f"{n}-a", f"{n}-r"]
    assert (await store.session(session.key)).input_tokens == 12


async def test_list_sessions_and_recent_origins_are_newest_first(store: Store) -> None:
    for key, origin in (("agent:main:1", "o1"), ("agent:main:2", ""), ("agent:main:3", "o3")):
        s = await store.session(key)
        await store.save_run(s.id, key, [user("x")], usage=Usage(), origin=origin or None)
        await asyncio.sleep(0.01)  # distinct updated_at
    assert [s.key for s in await store.list_sessions()] == [
        "agent:main:3",
        "agent:main:2",
        "agent:main:1",
    ]
    assert [s.key for s in await store.list_sessions(limit=1)] == ["agent:main:3"]
    assert await store.recent_origins() == ["o3", "o1"]
    assert await store.recent_origins(limit=1) == ["o3"]
    await store.archive_session("agent:main:3")
    assert await store.recent_origins() == ["o1"]
    assert "agent:main:3" not in [s.key for s in await store.list_sessions()]
    assert "agent:main:3" in [s.key for s in await store.list_sessions(archived=True)]


async def test_add_usage_and_session_totals(store: Store) -> None:
    parent = await store.session("agent:main:parent")
    await store.session("agent:main:grand")
    before = time.time() - 1
    await store.add_usage("agent:main:child", Usage(7, 3, 0, 0, 0.1), model="m2")
    child = await store.session("agent:main:child")
    assert (child.input_tokens, child.model) == (7, "m2")
    assert await store.count_messages(child.id) == 0
    await store.add_session_totals(
        ["agent:main:parent", "agent:main:grand", "agent:main:none"], Usage(7, 3, 0, 0, 0.1)
    )
    await store.add_session_totals([], Usage(100))
    assert (await store.session("agent:main:parent")).input_tokens == 7
    assert (await store.session("agent:main:grand")).cost_usd == pytest.approx(0.1)
    assert await store.find_session("agent:main:none") is None
    assert (await store.usage_since(before)).input_tokens == 7  # totals only, no ledger rows
    assert parent.input_tokens == 0


async def test_usage_by_day_sums_the_ledger_per_utc_day_and_model(store: Store) -> None:
    day = 86400.0
    base = 20_000 * day  # 2024-10-04 00:00 UTC
    rows = [  # (id, session_key, run_id, model, in, out, cache read, cache write, cost, at)
        (1, "agent:main:a", "r1", "m1", 10, 1, 2, 3, 0.5, base + 10),
        (2, "agent:main:b", "r2", "m1", 20, 2, 0, 0, 0.25, base + day - 1),
        (3, "agent:main:a", "r3", "m2", 5, 5, 0, 0, 1.0, base + 3600),
        (4, "agent:main:a", "r4", "m1", 1, 1, 0, 0, 0.125, base + day),  # the next day
        (5, "agent:main:a", "r5", "m1", 99, 99, 0, 0, 9.0, base - 1),  # before `since`
    ]
    await store.load("usage", rows)
    await store.finish_load()
    found = await store.usage_by_day(base)
    assert [(u.day, u.model) for u in found] == [
        ("2024-10-04", "m1"),
        ("2024-10-04", "m2"),
        ("2024-10-05", "m1"),
    ]
    first = found[0]
    assert (first.input_tokens, first.output_tokens) == (30, 3)
    assert (first.cache_read_tokens, first.cache_write_tokens) == (2, 3)
    assert first.cost_usd == pytest.approx(0.75)
    assert found[2].cost_usd == pytest.approx(0.125)
    assert await store.usage_by_day(base + 2 * day) == []


async def test_usage_by_day_keeps_to_one_agents_sessions_when_asked(store: Store) -> None:
    rows = [  # an agent id with `_` and `.`: a prefix, never a pattern
        (1, "agent:w_1.x:telegram:b:dm:1", "r1", "m1", 10, 1, 0, 0, 0.5, 100.0),
        (2, "agent:wa1.x:telegram:b:dm:1", "r2", "m1", 20, 2, 0, 0, 0.25, 100.0),
        (3, "agent:main:cron:j", "r3", "m1", 5, 5, 0, 0, 1.0, 100.0),
    ]
    await store.load("usage", rows)
    await store.finish_load()
    mine = await store.usage_by_day(0.0, session_prefix="agent:w_1.x:")
    assert [(u.input_tokens, u.cost_usd) for u in mine] == [(10, 0.5)]
    assert len(await store.usage_by_day(0.0, session_prefix="agent:nobody:")) == 0
    assert (await store.usage_by_day(0.0))[0].input_tokens == 35


async def test_compact_replaces_old_messages_and_keeps_newer_ones(store: Store) -> None:
    session = await store.session("agent:main:c")
    await store.save_run(
        session.id, session.key, [user("1"), assistant("2")], usage=Usage(), context_tokens=99
    )
    upto = (await store.messages_with_ids(session.id))[-1][0]
    await store.save_run(session.id, session.key, [user("3")], usage=Usage())
    assert await store.compact(session.id, "summary", upto) == 2
    row = await store.session(session.key)
    assert (row.summary, row.compactions, row.context_tokens) == ("summary", 1, 0)
    assert await store.messages(session.id) == [user("3")]


async def test_trim_runs_keeps_the_last_whole_runs(store: Store) -> None:
    session = await store.session("agent:main:heartbeat")
    for n in range(4):
        await store.save_run(
            session.id, session.key, [user(f"q{n}"), assistant(f"a{n}")], usage=Usage(),
            run_id=f"r{n}",
        )  # fmt: skip
    assert await store.trim_runs(session.id, 2) == 4
    assert await store.messages(session.id) == [user("q2"), assistant("a2"), user("q3"),
                                                assistant("a3")]  # fmt: skip
    assert await store.trim_runs(session.id, 2) == 0


async def test_archive_starts_a_fresh_session_and_reset_clears_in_place(store: Store) -> None:
    assert await store.archive_session("agent:main:x") is False
    assert await store.reset_session("agent:main:x") is False
    old = await store.session("agent:main:x")
    await store.save_run(old.id, old.key, [user("old")], usage=USAGE)
    assert await store.archive_session("agent:main:x") is True
    fresh = await store.session("agent:main:x")
    assert fresh.id != old.id
    assert (await store.messages(fresh.id), fresh.input_tokens) == ([], 0)
    assert await store.messages(old.id) == [user("old")]  # archived, not deleted
    await store.save_run(fresh.id, fresh.key, [user("new")], usage=USAGE, context_tokens=50)
    await store.compact(fresh.id, "sum", 0)
    assert await store.reset_session("agent:main:x") is True
    after = await store.session("agent:main:x")
    assert after.id == fresh.id
    assert (after.summary, after.context_tokens, after.input_tokens) == ("", 0, 10)
    assert await store.messages(after.id) == []


# -- inbox -------------------------------------------------------------------------------


async def test_inbox_writes_a_message_once(store: Store) -> None:
    payload = {"text": "hi ✓", "nested": {"a": [1, 2]}}
    first = await store.inbox_add("telegram", "bot", "c1", "m1", payload, "agent:main:k")
    assert first is not None
    assert await store.inbox_add("telegram", "bot", "c1", "m1", {"text": "again"}) is None
    other_chat = await store.inbox_add("telegram", "bot", "c2", "m1", {})
    other_channel = await store.inbox_add("slack", "bot", "c1", "m1", {})
    assert len({first, other_chat, other_channel}) == 3
    [row, *_] = await store.inbox_pending()
    assert (row.id, row.channel, row.account, row.chat_id, row.message_id) == (
        first,
        "telegram",
        "bot",
        "c1",
        "m1",
    )
    assert (row.session_key, row.payload) == ("agent:main:k", payload)


async def test_inbox_close_finishes_rows_and_they_stay_deduped(store: Store) -> None:
    a = await store.inbox_add("telegram", "bot", "c", "1", {})
    b = await store.inbox_add("telegram", "bot", "c", "2", {})
    c = await store.inbox_add("telegram", "bot", "c", "3", {})
    assert a is not None and b is not None and c is not None
    await store.inbox_close([a, c])
    await store.inbox_close([])
    assert [r.id for r in await store.inbox_pending()] == [b]
    await store.inbox_close([b], status="failed")
    assert await store.inbox_pending() == []
    assert await store.inbox_add("telegram", "bot", "c", "1", {}) is None


async def test_inbox_pending_is_in_arrival_order_with_its_received_time(store: Store) -> None:
    now = time.time()
    late = await store.inbox_add("telegram", "bot", "c", "late", {}, received_at=now)
    early = await store.inbox_add("telegram", "bot", "c", "early", {}, received_at=now - 3600)
    pending = await store.inbox_pending()
    assert [r.id for r in pending] == [late, early]  # in arrival order
    assert pending[1].received_at == pytest.approx(now - 3600)


async def test_inbox_prune_forgets_old_closed_rows_only(store: Store) -> None:
    now = time.time()
    old_done = await store.inbox_add("telegram", "bot", "c", "1", {}, received_at=now - 7200)
    old_pending = await store.inbox_add("telegram", "bot", "c", "2", {}, received_at=now - 7200)
    new_done = await store.inbox_add("telegram", "bot", "c", "3", {})
    assert old_done is not None and new_done is not None
    await store.inbox_close([old_done, new_done])
    await store.inbox_prune(now - 3600)
    assert [r.id for r in await store.inbox_pending()] == [old_pending]
    assert await store.inbox_add("telegram", "bot", "c", "1", {}) is not None  # forgotten
    assert await store.inbox_add("telegram", "bot", "c", "3", {}) is None  # still remembered


# -- pairing -----------------------------------------------------------------------------


def request(
    code: str, sender: str, *, channel: str = "telegram", ttl: float = 3600
) -> PairingRequest:
    now = time.time()
    return PairingRequest(channel, code, sender, f"name {sender}", now, now + ttl)


async def test_pairing_requests_list_unexpired_codes_by_channel(store: Store) -> None:
    await store.pairing_add(request("AAAA2222", "1"))
    await store.pairing_add(request("BBBB3333", "2", channel="slack"))
    await store.pairing_add(request("CCCC4444", "3", ttl=-1))
    assert [r.code for r in await store.pairing_requests()] == ["AAAA2222", "BBBB3333"]
    [only] = await store.pairing_requests("slack")
    assert (only.code, only.sender_id, only.sender_name) == ("BBBB3333", "2", "name 2")


async def test_pairing_approve_lets_the_sender_in_and_drops_their_codes(store: Store) -> None:
    await store.pairing_add(request("AAAA2222", "1"))
    await store.pairing_add(request("DDDD5555", "1"))
    assert await store.is_approved("telegram", "1") is False
    assert await store.pairing_approve("slack", "AAAA2222") is None  # wrong channel
    approved = await store.pairing_approve("telegram", " aaaa2222 ")
    assert approved is not None and approved.sender_id == "1"
    assert await store.is_approved("telegram", "1") is True
    assert await store.is_approved("slack", "1") is False
    assert await store.pairing_requests() == []
    assert await store.pairing_approve("telegram", "DDDD5555") is None
    await store.pairing_add(request("EEEE6666", "1"))
    assert await store.pairing_approve("telegram", "EEEE6666") is not None  # twice is fine


async def test_approved_senders_are_listed_and_can_be_revoked(store: Store) -> None:
    await store.pairing_add(request("AAAA2222", "1"))
    await store.pairing_add(request("BBBB3333", "2", channel="slack"))
    assert await store.pairing_approve("telegram", "AAAA2222") is not None
    assert await store.pairing_approve("slack", "BBBB3333") is not None
    listed = await store.approved_senders()
    assert [(c, s) for c, s, _ in listed] == [("slack", "2"), ("telegram", "1")]
    assert all(at > 0 for _, _, at in listed)
    assert [s for _, s, _ in await store.approved_senders("telegram")] == ["1"]
    assert await store.pairing_revoke("telegram", "1") is True
    assert await store.is_approved("telegram", "1") is False
    assert await store.pairing_revoke("telegram", "1") is False  # not approved any more
    assert await store.is_approved("slack", "2") is True


async def test_pairing_deny_drops_one_code_and_lets_nobody_in(store: Store) -> None:
    await store.pairing_add(request("AAAA2222", "1"))
    await store.pairing_add(request("BBBB3333", "2"))
    await store.pairing_add(request("CCCC4444", "3", ttl=-1))
    assert await store.pairing_deny("slack", "AAAA2222") is None  # wrong channel
    denied = await store.pairing_deny("telegram", " aaaa2222 ")
    assert denied is not None and (denied.code, denied.sender_id) == ("AAAA2222", "1")
    assert [r.code for r in await store.pairing_requests()] == ["BBBB3333"]
    assert await store.is_approved("telegram", "1") is False
    assert await store.approved_senders() == []
    assert await store.pairing_deny("telegram", "AAAA2222") is None  # gone
    assert await store.pairing_deny("telegram", "CCCC4444") is None  # expired
    assert await store.pairing_approve("telegram", "AAAA2222") is None


async def test_an_expired_code_cannot_be_approved(store: Store) -> None:
    await store.pairing_add(request("AAAA2222", "1", ttl=-1))
    assert await store.pairing_approve("telegram", "AAAA2222") is None
    assert await store.is_approved("telegram", "1") is False


# -- cron --------------------------------------------------------------------------------


def job(job_id: str, *, created_at: float = 1000.0, enabled: bool = True) -> CronJobRow:
    return CronJobRow(
        id=job_id,
        name=f"job {job_id}",
        schedule_kind="every",
        schedule="600",
        tz="Europe/Berlin",
        message="stretch ✓",
        session_mode="chat",
        deliver_to="owner",
        enabled=enabled,
        created_at=created_at,
        created_by="tester",
        next_run_at=created_at + 600,
    )


async def test_cron_jobs_are_stored_and_listed_oldest_first(store: Store) -> None:
    assert await store.cron_get("nope") is None
    await store.cron_insert(job("b", created_at=2000.0))
    await store.cron_insert(job("a", created_at=1000.0, enabled=False))
    assert await store.cron_get("b") == job("b", created_at=2000.0)
    assert [j.id for j in await store.cron_all()] == ["a", "b"]
    assert await store.cron_count_enabled() == 1
    with pytest.raises(Exception):  # noqa: B017 (ids are unique)
        await store.cron_insert(job("b"))


async def test_cron_update_sets_state_and_records_the_run_with_it(store: Store) -> None:
    await store.cron_insert(job("a"))
    run = CronRun("a", 1600.0, 1601.5, "delivered", "sent")
    assert await store.cron_update(
        "a", enabled=True, next_run_at=2200.0, failures=0, last_run_at=1600.0,
        last_status="delivered", run=run,
    )  # fmt: skip
    got = await store.cron_get("a")
    assert got is not None
    assert (got.next_run_at, got.last_run_at, got.last_status, got.last_error) == (
        2200.0,
        1600.0,
        "delivered",
        "",
    )
    # None keeps a field; a one-shot that is done has no next run
    assert await store.cron_update("a", enabled=False, next_run_at=None, failures=2)
    got = await store.cron_get("a")
    assert got is not None
    assert (got.enabled, got.next_run_at, got.failures, got.last_status) == (
        False,
        None,
        2,
        "delivered",
    )
    assert await store.cron_runs("a") == [run]
    assert await store.cron_update("gone", enabled=True, next_run_at=1.0, failures=0) is False


async def test_cron_runs_are_newest_first_and_removed_with_their_job(store: Store) -> None:
    await store.cron_insert(job("a"))
    for n in range(5):
        await store.cron_record_run(CronRun("a", 100.0 + n, 100.5 + n, "ok", f"run {n}"))
    assert [r.detail for r in await store.cron_runs("a", limit=3)] == ["run 4", "run 3", "run 2"]
    assert await store.cron_remove("a") is True
    assert await store.cron_runs("a") == []
    assert await store.cron_get("a") is None
    assert await store.cron_remove("a") is False


async def test_cron_changes_by_another_handle_are_noticed(backend: Backend) -> None:
    watcher = await backend.open()
    writer = await backend.open()
    try:
        before = await watcher.cron_changes()
        assert await watcher.cron_changes() == before  # stable while nothing changes
        await writer.cron_insert(job("x"))
        after_insert = await watcher.cron_changes()
        assert after_insert != before
        await writer.cron_remove("x")
        assert await watcher.cron_changes() != after_insert
    finally:
        await writer.close()
        await watcher.close()


# -- the search index --------------------------------------------------------------------


def doc(ref: str, text: str, *, source: SearchSource = "memory", group: str = "g",
        scope: str = "owner", at: float = 1000.0) -> SearchDocument:  # fmt: skip
    return SearchDocument(source, ref, group, scope, f"title {ref}", text, at)


def refs(hits: list[SearchHit]) -> list[str]:
    return [h.document.ref for h in hits]


def others(count: int) -> list[SearchDocument]:
    """Documents about nothing asked (two words each): in a tiny index every word is common."""
    return [doc(f"other{n}", f"pebble{n} gravel{n}") for n in range(count)]


async def test_search_ranks_what_holds_the_words_and_finds_nothing_for_the_unrelated(
    store: Store,
) -> None:
    await store.index_documents([
        doc("bday", "Ada's birthday is on the 12th of May.", at=1.0),
        doc("cat", "Ada has a grey cat called Miso.", at=2.0),
        doc("work", "The quarterly report is due on Friday.", at=3.0),
        *others(5),
    ])  # fmt: skip
    hits = await store.search(SearchQuery.of("When are Ada's birthdays?", scopes=None))
    assert refs(hits) == ["bday", "cat"]  # stemmed: birthdays finds birthday
    best, other = hits
    assert best.score > 0.8 > 0.6 > other.score > 0  # all the message asks, or a part
    assert set(best.matched) == {"ada", "birthday"} and other.matched == ("ada",)
    assert best.document == doc("bday", "Ada's birthday is on the 12th of May.", at=1.0)
    assert await store.search(SearchQuery.of("a good pasta recipe?", scopes=None)) == []
    assert await store.search(SearchQuery.of("the and of is", scopes=None)) == []  # stop words
    kept = await store.search(SearchQuery.of("Ada's birthday", scopes=None, min_score=0.7))
    assert refs(kept) == ["bday"]


async def test_a_score_is_the_share_of_the_messages_weight_a_document_holds(store: Store) -> None:
    # same length each: BM25 of one term held once is its idf; the scale is both idfs
    await store.index_documents([
        doc("a", "lantern harbour"), doc("b", "lantern meadow"), doc("c", "orchard meadow"),
        doc("d", "orchard valley"), *others(2),
    ])  # fmt: skip
    idf_lantern = idf_orchard = math.log(1 + (6 - 2 + 0.5) / (2 + 0.5))
    hits = await store.search(SearchQuery.of("lantern orchard", scopes=None))
    assert len(hits) == 4
    for hit in hits:
        assert hit.score == pytest.approx(idf_lantern / (idf_lantern + idf_orchard))
    context = await store.search(SearchQuery.of("harbour", "meadow", scopes=None))
    assert refs(context) == ["a"]  # context adds to a score, it does not find alone ...
    alone = await store.search(SearchQuery.of("harbour", scopes=None))
    assert context[0].score == alone[0].score == 1.0  # ... nor raise the scale


async def test_search_shows_only_the_scopes_sources_and_groups_asked_for(store: Store) -> None:
    await store.index_documents([
        doc("note", "the boat needs new sails", scope="owner"),
        doc("dm", "the boat trip is on Sunday", source="sessions", scope="dm:p", group="s1"),
        doc("grp", "boat club meets at noon", source="sessions", scope="group:g", group="s2"),
        doc("skill", "sailing: plan a boat trip", source="skills", scope="public"),
        *others(8),
    ])  # fmt: skip

    async def found(**kw: Any) -> set[str]:
        return set(refs(await store.search(SearchQuery.of("boat", **{"limit": 10, **kw}))))

    assert await found(scopes=None) == {"note", "dm", "grp", "skill"}
    assert await found(scopes=("dm:p", "public")) == {"dm", "skill"}
    assert await found(scopes=("group:g",)) == {"grp"}
    assert await found(scopes=()) == set()
    assert await found(scopes=None, sources=("sessions",)) == {"dm", "grp"}
    assert await found(scopes=None, exclude_groups=("s1", "s2")) == {"note", "skill"}
    assert len(await found(scopes=None, limit=1)) == 1


async def test_the_same_source_and_ref_is_replaced_and_groups_go_together(store: Store) -> None:
    await store.index_documents([doc("n1", "violin lessons on Tuesday", group="f"), *others(4)])
    await store.index_documents([doc("n1", "cello lessons on Tuesday", group="f")])
    assert await store.search(SearchQuery.of("violin", scopes=None)) == []
    assert refs(await store.search(SearchQuery.of("cello", scopes=None))) == ["n1"]
    assert await store.search_counts() == {"memory": 5}
    await store.replace_group(
        "memory",
        "f",
        [doc("n2", "piano on Monday", group="f"), doc("n3", "flute", group="f")],
        "s1",
    )
    assert await store.search(SearchQuery.of("cello", scopes=None)) == []
    assert await store.search_stamps("memory") == {"f": "s1"}
    await store.replace_group("skills", "empty", [], "built")  # a stamp alone
    assert await store.search_stamps("skills") == {"empty": "built"}
    assert await store.search_counts() == {"memory": 6}
    assert await store.remove_group("memory", "f") == 2
    assert await store.search_stamps("memory") == {}
    assert await store.search(SearchQuery.of("piano", scopes=None)) == []
    assert await store.remove_group("memory", "f") == 0


async def test_counts_follow_every_change_so_scores_stay_right(store: Store) -> None:
    await store.index_documents([doc("x", "quartz"), doc("y", "quartz granite")])
    await store.replace_group("memory", "other", [doc("z", "granite", group="other")], "1")
    await store.clear_search("memory")
    assert await store.search_counts() == {}
    assert await store.search_stamps("memory") == {}
    await store.index_documents([doc("a", "quartz basalt"), doc("b", "basalt shale"), *others(3)])
    (hit,) = await store.search(SearchQuery.of("quartz granite", scopes=None))
    assert hit.document.ref == "a" and hit.score == 1.0  # granite is held by none now
    await store.index_documents([doc("s", "quartz", source="skills", scope="public")])
    await store.clear_search()
    assert await store.search_counts() == {}
    assert await store.search(SearchQuery.of("quartz", scopes=None)) == []


async def test_hostile_queries_and_texts_are_only_words(store: Store) -> None:
    nasty = ['"', "'", 'NEAR(a b) OR "x', "a* AND NOT b", "col:term ^x", "a & b | !c <-> d:*",
             "\x00\\'; DROP TABLE search_docs; --", "((((", "🦜 ünïcödé ǅ"]  # fmt: skip
    await store.index_documents([doc(str(i), text) for i, text in enumerate(nasty)])
    for text in nasty:
        await store.search(SearchQuery.of(text, scopes=None))
    hits = await store.search(SearchQuery.of("unicode DROP", scopes=None))
    assert set(refs(hits)) == {"6", "8"}


async def test_one_document_indexed_through_two_handles_at_once_is_kept_once(
    backend: Backend,
) -> None:
    first, second = await backend.open(), await backend.open()
    try:
        for round_ in range(5):
            docs = [doc(f"r{n}", f"shared words round{round_} item{n}") for n in range(20)]
            await asyncio.gather(first.index_documents(docs), second.index_documents(docs[::-1]))
        assert await first.search_counts() == {"memory": 20}
        (hit,) = await first.search(SearchQuery.of("round4 item7", scopes=None, limit=1))
        assert hit.document.ref == "r7" and hit.score == 1.0
    finally:
        await first.close()
        await second.close()


async def test_a_second_daemon_cannot_hold_an_unshared_store(backend: Backend) -> None:
    first = await backend.open()
    second = await backend.open()
    try:
        one = await first.hold_instance()
        if first.shared:  # PostgreSQL: instances cooperate, each with an id of its own
            assert await second.hold_instance() != one
            return
        with pytest.raises(AlreadyRunning, match="already running"):
            await second.hold_instance()
        await first.close()
        await second.hold_instance()  # free again once the first is gone
    finally:
        await second.close()
        await first.close()


# -- copying between stores --------------------------------------------------------------


async def fill(store: Store) -> None:
    """A bit of everything a running Perch writes."""
    await store.set_channel_state("email", "imap:perch@example.com/INBOX", "1795:42")
    s = await store.session("agent:main:telegram:bot:dm:1")
    await store.save_run(s.id, s.key, [user("q ✓"), assistant("a")], usage=USAGE, run_id="r1",
                         model="m", origin='{"c":"telegram"}')  # fmt: skip
    await store.archive_session(s.key)
    s2 = await store.session(s.key)
    await store.save_run(s2.id, s2.key, [user("again")], usage=Usage(1, 1, 0, 0, 0.01))
    done = await store.inbox_add("telegram", "bot", "1", "m1", {"text": "q ✓"}, s.key)
    assert done is not None
    await store.inbox_close([done])
    await store.inbox_add("telegram", "bot", "1", "m2", {"text": "pending"}, s.key)
    await store.pairing_add(request("AAAA2222", "5"))
    await store.pairing_add(request("BBBB3333", "6"))
    await store.pairing_approve("telegram", "BBBB3333")
    await store.cron_insert(job("j1"))
    await store.cron_insert(job("j2", enabled=False))
    await store.cron_record_run(CronRun("j1", 1.0, 2.0, "ok", "fine"))


async def dump_all(store: Store) -> dict[str, list[tuple[object, ...]]]:
    tables: dict[str, list[tuple[object, ...]]] = {}
    for table in COPY_COLUMNS:
        tables[table] = [row async for rows in store.dump(table, batch=2) for row in rows]
    return tables


async def test_dump_and_load_copy_every_row_with_its_ids(backend: Backend) -> None:
    source = await backend.open()
    target = await backend.open_other()
    try:
        await fill(source)
        assert await source.is_empty() is False
        assert await target.is_empty() is True
        for table in COPY_COLUMNS:
            async for rows in source.dump(table, batch=2):
                await target.load(table, rows)
        await target.finish_load()
        assert await dump_all(target) == await dump_all(source)
        # the copy is a working store: ids continue after the copied ones, dedupe holds
        s = await target.session("agent:main:telegram:bot:dm:1")
        before = [i for i, _ in await target.messages_with_ids(s.id)]
        await target.save_run(s.id, s.key, [user("after")], usage=Usage())
        after = [i for i, _ in await target.messages_with_ids(s.id)]
        assert after[:-1] == before and after[-1] > max(before)
        assert await target.inbox_add("telegram", "bot", "1", "m1", {}) is None
        assert [r.message_id for r in await target.inbox_pending()] == ["m2"]
        assert await target.inbox_add("telegram", "bot", "1", "m3", {}) is not None
        assert await target.is_approved("telegram", "6")
        assert [j.id for j in await target.cron_all()] == ["j1", "j2"]
    finally:
        await target.close()
        await source.close()


# -- instances ---------------------------------------------------------------------------


async def test_instances_report_themselves_and_go_away(store: Store) -> None:
    now = time.time()
    a = InstanceRow("a", "host-1", 11, now - 100, now - 5, {"channels": {"telegram": True}})
    b = InstanceRow("b", "host-2", 22, now - 50, now - 90, {})
    await store.instance_beat(a)
    await store.instance_beat(b)
    assert [i.id for i in await store.instances(now - 120)] == ["a", "b"]  # oldest start first
    assert await store.instances(now - 30) == [a]  # b was not seen lately
    refreshed = InstanceRow("a", "host-1", 11, now, now, {"active_runs": 2})
    await store.instance_beat(refreshed)
    [again] = await store.instances(now - 1)
    assert again.started_at == a.started_at  # a beat refreshes, it does not restart
    assert (again.seen_at, again.detail) == (now, {"active_runs": 2})
    await store.instance_gone("a")
    await store.instance_gone("nope")
    assert [i.id for i in await store.instances(0)] == ["b"]


# -- two handles on one store (two processes, or two instances on PostgreSQL) -------------


async def test_a_message_is_written_once_across_handles(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        adds = [
            handle.inbox_add("telegram", "bot", "c", f"m{n}", {"n": n})
            for n in range(10)
            for handle in (one, two)
        ]
        ids = await asyncio.gather(*adds)
        for n in range(10):
            assert sum(i is not None for i in ids[2 * n : 2 * n + 2]) == 1
        assert len(await one.inbox_pending()) == 10
    finally:
        await two.close()
        await one.close()


async def test_runs_saved_through_two_handles_never_interleave(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        session = await one.session("agent:main:shared")

        async def run(handle: Store, n: int) -> None:
            msgs = [user(f"{n}-q"), assistant(f"{n}-a")]
            await handle.save_run(session.id, session.key, msgs, usage=Usage(1), run_id=f"{n}")

        await asyncio.gather(*(run(one if n % 2 else two, n) for n in range(10)))
        texts = [m["content"][0]["text"] for m in await two.messages(session.id)]
        assert len(texts) == 20
        for start in range(0, 20, 2):
            n = texts[start].split("-")[0]
            assert texts[start : start + 2] == [f"{n}-q", f"{n}-a"]
        assert (await one.session(session.key)).input_tokens == 10
    finally:
        await two.close()
        await one.close()


# -- inbox claims and leases -------------------------------------------------------------


async def test_unowned_pending_rows_are_claimed_once_oldest_first(store: Store) -> None:
    first = await store.inbox_add("telegram", "bot", "c", "1", {"n": 1})
    second = await store.inbox_add("telegram", "bot", "c", "2", {"n": 2})
    done = await store.inbox_add("telegram", "bot", "c", "3", {})
    assert done is not None
    await store.inbox_close([done])
    claimed = await store.inbox_claim()
    assert [(r.id, r.payload) for r in claimed] == [(first, {"n": 1}), (second, {"n": 2})]
    assert await store.inbox_claim() == []  # leased to the claimant now
    later = time.time() + INBOX_LEASE + 1
    assert [r.id for r in await store.inbox_claim(now=later)] == [first, second]


async def test_a_held_instance_keeps_its_rows_while_it_beats(backend: Backend) -> None:
    live = await backend.open()
    other = await backend.open()
    try:
        instance = await live.hold_instance()
        row_id = await live.inbox_add("telegram", "bot", "c", "1", {})
        now = time.time()
        assert await other.inbox_claim(now=now + INBOX_LEASE - 5) == []
        beat = InstanceRow(instance, "h", 1, now, now + 20, {})
        await live.instance_beat(beat)  # renews its rows until seen_at + INBOX_LEASE
        assert await other.inbox_claim(now=now + INBOX_LEASE + 5) == []
        # the instance stops beating (killed): after the lease its row is taken over once
        taken = await other.inbox_claim(now=now + 20 + INBOX_LEASE + 1)
        assert [r.id for r in taken] == [row_id]
        assert await live.inbox_claim(now=now + 20 + INBOX_LEASE + 2) == []
    finally:
        await other.close()
        await live.close()


async def test_a_new_holder_takes_over_what_the_last_one_left(backend: Backend) -> None:
    dead = await backend.open()
    await dead.hold_instance()
    row_id = await dead.inbox_add("telegram", "bot", "c", "1", {})
    await dead.close()  # as after a crash: the row is still pending and leased
    fresh = await backend.open()
    try:
        await fresh.hold_instance()
        # an unshared store knows the last holder is gone; a shared one waits for its lease
        later = time.time() + (fresh.lease + 1 if fresh.shared else 0)
        assert [r.id for r in await fresh.inbox_claim(now=later)] == [row_id]
    finally:
        await fresh.close()


async def test_concurrent_claims_never_hand_out_a_row_twice(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        for n in range(30):
            await one.inbox_add("telegram", "bot", "c", str(n), {})
        claims = await asyncio.gather(
            *(handle.inbox_claim() for _ in range(3) for handle in (one, two))
        )
        ids = [r.id for rows in claims for r in rows]
        assert len(ids) == len(set(ids)) == 30
    finally:
        await two.close()
        await one.close()


async def test_a_holder_does_not_take_back_its_own_rows(backend: Backend) -> None:
    live = await backend.open()
    other = await backend.open()
    try:
        await live.hold_instance()
        await other.hold_instance() if other.shared else None
        row_id = await live.inbox_add("telegram", "bot", "c", "1", {})
        later = time.time() + INBOX_LEASE + 1
        assert await live.inbox_claim(now=later) == []  # still in its memory
        if live.shared:
            assert [r.id for r in await other.inbox_claim(now=later)] == [row_id]
    finally:
        await other.close()
        await live.close()


async def test_a_clean_stop_frees_rows_and_claims_at_once(backend: Backend) -> None:
    gone = await backend.open()
    other = await backend.open()
    try:
        instance = await gone.hold_instance()
        row_id = await gone.inbox_add("telegram", "bot", "c", "1", {})
        assert await gone.claim("session:x")
        await gone.instance_gone(instance)
        assert [r.id for r in await other.inbox_claim()] == [row_id]
        assert await other.claim("session:x")
    finally:
        await other.close()
        await gone.close()


# -- claims ------------------------------------------------------------------------------


async def hold_both(one: Any, two: Any) -> str:
    """Two handles as two instances: on a shared store each holds its own; on a file (one
    daemon per file) the second is another holder's view. The first's instance id."""
    instance = await one.hold_instance()
    if one.shared:
        await two.hold_instance()
    else:
        two.holder = "other"
    return instance


async def test_a_claim_goes_to_one_instance_until_released_or_expired(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        await hold_both(one, two)
        race = await asyncio.gather(*(h.claim("cron:j", 300.0) for h in (one, two) * 5))
        ones, twos = race[0::2], race[1::2]
        assert (all(ones) and not any(twos)) or (all(twos) and not any(ones))
        assert await one.claim("cron:j", 100.0)
        assert not await two.claim("cron:j", 100.0)
        assert await one.claim("cron:j", 100.0)  # the holder may claim again
        assert await two.claim("cron:j", 200.0)  # another slot is another claim
        now = time.time()
        later = now + one.lease + 1
        assert await two.claim("cron:j", 100.0, now=later)  # the holder stopped beating
        assert not await one.claim("cron:j", 100.0, now=later + 1)
        await two.release("cron:j", 100.0, done=False)
        assert await one.claim("cron:j", 100.0)  # free again at once
        assert not await two.claim_done("cron:j", 100.0)
        await one.release("cron:j", 100.0, done=True)
        assert await two.claim_done("cron:j", 100.0) and await one.claim_done("cron:j", 100.0)
        assert not await two.claim_done("cron:j", 200.0)  # another slot, not done
        far = now + 10 * one.lease
        assert not await two.claim("cron:j", 100.0, now=far)  # done: never again
        await one.claims_prune(far)
        assert await two.claim("cron:j", 100.0, now=far)  # forgotten
    finally:
        await two.close()
        await one.close()


async def test_a_beat_renews_the_claims_of_its_instance(backend: Backend) -> None:
    live = await backend.open()
    other = await backend.open()
    try:
        instance = await hold_both(live, other)
        now = time.time()
        assert await live.claim("session:dm", 0.0, now=now)
        await live.instance_beat(InstanceRow(instance, "h", 1, now, now + 20, {}))
        assert not await other.claim("session:dm", 0.0, now=now + live.lease + 5)
        assert await other.claim("session:dm", 0.0, now=now + 20 + live.lease + 1)
    finally:
        await other.close()
        await live.close()


async def test_leadership_is_held_by_one_store_at_a_time(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        assert await one.leadership("telegram")
        assert await one.leadership("telegram")  # still ours
        if not one.shared:
            assert await two.leadership("telegram")  # one daemon per file: always its own
            return
        assert not await two.leadership("telegram")
        assert await two.leadership("signal")  # another name, another leader
        await one.close()  # the leader stops (or dies): the lock goes with its connection
        assert await two.leadership("telegram")
    finally:
        await two.close()
        await one.close()


async def test_stop_requests_reach_the_other_handles_only(backend: Backend) -> None:
    one = await backend.open()
    two = await backend.open()
    try:
        await hold_both(one, two)
        start, seen = await two.stops_after(None)  # where to start: nothing before counts
        assert seen == []
        await one.stop_publish("agent:main:dm:x", False)
        await one.stop_publish("agent:main:dm:y", True)
        after, seen = await two.stops_after(start)
        assert seen == [("agent:main:dm:x", False), ("agent:main:dm:y", True)]
        assert await two.stops_after(after) == (after, [])
        assert (await one.stops_after(start))[1] == []  # its own requests are not for it
        assert await one.claim("session:agent:main:dm:x")
        assert await two.claim_holders("session:agent:main:dm:x") == [await _holder(one)]
        assert await one.claim_holders("session:agent:main:dm:x") == []
    finally:
        await two.close()
        await one.close()


async def _holder(store: Store) -> str:
    return str(store.holder)  # type: ignore[attr-defined]


async def test_one_model_choice_per_session_key(store: Store) -> None:
    assert await store.session_model("k") == ""
    await store.set_session_model("k", "local/qwen3:8b")
    await store.set_session_model("k", "local/phi4")
    await store.set_session_model("other", "claude-haiku-4-5")
    assert await store.session_model("k") == "local/phi4"
    await store.set_session_model("k", "")
    assert await store.session_model("k") == ""
    assert await store.session_model("other") == "claude-haiku-4-5"


# -- bounded history reads (issue 19) ------------------------------------------------------


async def test_recent_messages_returns_the_tail_oldest_first_and_the_total(store: Store) -> None:
    session = await store.session("telegram:dm:tail")
    assert await store.recent_messages(session.id, 10) == ([], 0)
    saved = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(9)]
    await store.save_run(session.id, session.key, saved, usage=USAGE)
    assert await store.recent_messages(session.id, 4) == (saved[-4:], 9)
    assert await store.recent_messages(session.id, 100) == (saved, 9)
    assert await store.recent_messages(session.id, 0) == ([], 9)


async def test_session_with_recent_creates_once_and_reads_the_tail(store: Store) -> None:
    session, tail, total = await store.session_with_recent("telegram:dm:both", 4)
    assert (tail, total) == ([], 0) and session == await store.session("telegram:dm:both")
    saved = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(9)]
    await store.save_run(session.id, session.key, saved, usage=USAGE)
    again, tail, total = await store.session_with_recent("telegram:dm:both", 4)
    assert again.id == session.id and (tail, total) == (saved[-4:], 9)
    assert (await store.session_with_recent("telegram:dm:both", 0))[1:] == ([], 9)
    assert len(await store.list_sessions()) == 1
    # First use by several turns at once (or instances): one session for them all.
    first = await asyncio.gather(
        *(store.session_with_recent("telegram:dm:new", 4) for _ in "abcde")
    )
    assert len({row.id for row, _, _ in first}) == 1 and len(await store.list_sessions()) == 2


async def test_a_save_that_fails_leaves_nothing_and_the_store_keeps_working(store: Store) -> None:
    session = await store.session("telegram:dm:atomic")
    with pytest.raises(Exception):  # noqa: B017 (each backend raises its own driver error)
        await store.save_run("no-such-session", session.key, [user("lost")], usage=USAGE)
    assert await store.messages(session.id) == []
    await store.save_run(session.id, session.key, [user("kept")], usage=USAGE)
    assert await store.messages(session.id) == [user("kept")]
    assert (await store.session(session.key)).input_tokens == USAGE.input_tokens


async def test_nul_characters_are_stored_and_read_back(store: Store) -> None:
    # "\u0000" is valid JSON a platform or a model may send; PostgreSQL's text refuses it.
    payload = {"text": "a\x00b", "sender_name": "x\x00"}
    row_id = await store.inbox_add("telegram", "bot", "c1", "m1", payload, "k")
    assert row_id is not None
    [row] = await store.inbox_pending()
    assert row.payload == payload
    session = await store.session("agent:main:nul")
    message = {"role": "user", "content": [{"type": "text", "text": "nul \x00 here"}]}
    await store.save_run(session.id, "agent:main:nul", [message], usage=Usage(), run_id="r1")
    assert await store.messages(session.id) == [message]
