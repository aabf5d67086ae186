"""What approvers read and type (bot/approvals/cards.py): `/approve <id> [always]` and
`/deny <id>` read strictly, ids easy to type, the decided card without its instructions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.approval import ApprovalRequest
from bot.approvals.cards import (
    TypedAnswer,
    decided_text,
    new_approval_id,
    read_command,
    request_text,
)
from bot.store.rows import ApprovalRow


@pytest.mark.parametrize(
    ("name", "argument", "expected"),
    [
        ("approve", "k7m2pq", TypedAnswer("k7m2pq", True, False)),
        ("approve", "K7M2PQ always", TypedAnswer("k7m2pq", True, True)),
        ("deny", " k7m2pq ", TypedAnswer("k7m2pq", False, False)),
        ("deny", "k7m2pq always", "Write /deny <id>."),
        (
            "approve",
            "",
            "Write /approve <id> (or /approve <id> always): the id is in the approval request.",
        ),
        ("approve", "k7m2pq please", "Write /approve <id> (or /approve <id> always)."),
        (
            "approve",
            "../../x",
            "Write /approve <id> (or /approve <id> always): the id is in the approval request.",
        ),
    ],
)
def test_typed_answers_are_read_strictly(name: str, argument: str, expected: object) -> None:
    assert read_command(name, argument) == expected


@given(st.sampled_from(["approve", "deny"]), st.text(max_size=80))
def test_any_text_reads_as_an_answer_or_as_how_to_write_one(name: str, argument: str) -> None:
    read = read_command(name, argument)
    if isinstance(read, TypedAnswer):
        assert read.approval_id.isalnum() and read.approval_id == read.approval_id.lower()
        assert read.approve == (name == "approve") and (not read.always or name == "approve")
    else:
        assert read.startswith(f"Write /{name} <id>")


def test_ids_are_short_and_unambiguous() -> None:
    ids = {new_approval_id() for _ in range(200)}
    assert len(ids) > 190
    assert all(len(i) == 6 and not set(i) & set("01ilo") for i in ids)


def test_a_decided_card_keeps_what_was_asked_and_drops_the_instructions() -> None:
    request = ApprovalRequest("exec", "rm notes.md", "exec:rm notes.md", "k", None, "42", "r")
    text = request_text(
        "k7m2pq", request, "Asked by 42 in a DM on signal.", 300, typed=True, remember=True
    )
    assert "/approve k7m2pq always" in text and "No answer within 5 minutes" in text
    row = ApprovalRow("k7m2pq", 0.0, "k", "", "exec", "rm notes.md", "", "signal:42")
    row.status, row.decided_by = "denied", "signal:42"
    shown = decided_text(text, row)
    assert "rm notes.md" in shown and shown.endswith("Denied by 42.")
    assert "/approve" not in shown and "No answer within" not in shown
