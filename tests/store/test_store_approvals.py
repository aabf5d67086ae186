"""The `Approvals` role of the store contract (requests for risky tools and their decisions),
on every backend: an SQLite file and a throwaway PostgreSQL database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.store.roles import Store
from bot.store.rows import ApprovalRow
from tests.store_backends import Backend


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    s = await backend.open()
    try:
        yield s
    finally:
        await s.close()


def request(approval_id: str, at: float, *, instance: str = "i1") -> ApprovalRow:
    return ApprovalRow(
        id=approval_id,
        created_at=at,
        session_key="agent:main:telegram:1:dm:42",
        origin="telegram:1:dm:42",
        tool="exec",
        summary="rm notes.md",
        requester="telegram:42",
        approver="telegram:42",
        instance=instance,
    )


async def test_requests_are_listed_newest_first_with_their_decisions(store: Store) -> None:
    await store.approval_add(request("a1", 100.0))
    await store.approval_add(request("a2", 200.0))
    decided = await store.approval_decide(
        "a1", "approved", "telegram:42", "tapped Approve", remembered=True, at=150.0
    )
    assert decided is not None
    assert (decided.status, decided.decided_by, decided.decided_at) == (
        "approved",
        "telegram:42",
        150.0,
    )
    assert decided.remembered is True and decided.reason == "tapped Approve"
    listed = await store.approvals()
    assert [r.id for r in listed] == ["a2", "a1"]
    assert listed[0].status == "pending" and listed[0].decided_at is None
    assert listed[1] == decided
    assert await store.approval_get("a2") == listed[0]
    assert await store.approval_get("nope") is None
    assert [r.id for r in await store.approvals(limit=1)] == ["a2"]


async def test_only_the_first_decision_counts(store: Store) -> None:
    await store.approval_add(request("a1", 100.0))
    assert await store.approval_decide("a1", "denied", "telegram:42") is not None
    assert await store.approval_decide("a1", "approved", "telegram:42") is None
    assert await store.approval_decide("unknown", "approved", "telegram:42") is None
    row = await store.approval_get("a1")
    assert row is not None and row.status == "denied" and row.remembered is False


async def test_a_gone_instances_pending_requests_are_denied_as_restarted(store: Store) -> None:
    await store.approval_add(request("old", 100.0, instance="gone"))
    await store.approval_add(request("live", 110.0, instance="alive"))
    await store.approval_add(request("done", 120.0, instance="gone"))
    await store.approval_decide("done", "approved", "telegram:42")
    closed = await store.approvals_abandon(["alive"], "the daemon restarted", at=300.0)
    assert [(r.id, r.status, r.reason, r.decided_at) for r in closed] == [
        ("old", "restart", "the daemon restarted", 300.0)
    ]
    rows = {r.id: r for r in await store.approvals()}
    assert rows["old"].status == "restart" and rows["live"].status == "pending"
    assert rows["done"].status == "approved"
    assert [r.id for r in await store.approvals_abandon([], "again")] == ["live"]
