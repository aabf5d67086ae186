"""WhatsApp's pure parts: the formatting renderer, the webhook signature, the options' phone
numbers, reading Meta's event envelopes (whatever arrives), the held messages' file, and the
chunker's limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from channels.whatsapp.delivery import MAX_TEXT, rendered_chunks
from channels.whatsapp.inbound import read_events
from channels.whatsapp.options import WhatsAppOptions, wa_id
from channels.whatsapp.render import render_whatsapp
from channels.whatsapp.webhook import signature, signature_ok
from channels.whatsapp.window import HeldMessages, ServiceWindow
from tests.fakes import whatsapp as wa


@pytest.mark.parametrize(
    ("markdown", "shown"),
    [
        ("**bold** and *italic* and ~~gone~~", "*bold* and _italic_ and ~gone~"),
        ("# Heading", "*Heading*"),
        ("use `pip install`", "use `pip install`"),
        ("```py\nprint(1)\n```", "```print(1)```"),
        ("- one\n- two", "• one\n• two"),
        ("> quoted **x**", "> quoted *x*"),
        ("[docs](https://example.org/d)", "docs (https://example.org/d)"),
        ("<https://example.org>", "https://example.org"),
        ("[x](javascript:alert(1))", "x (javascript:alert(1))"),  # shown, never a link
        ("| a | b |\n|---|---|\n| 1 | 2 |", "```| a | b |\n|---|---|\n| 1 | 2 |```"),
        ("** not bold **", "** not bold **"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
    ],
)
def test_markdown_reads_well_in_whatsapp(markdown: str, shown: str) -> None:
    assert render_whatsapp(markdown) == shown


@given(st.text(max_size=400))
def test_the_renderer_never_raises_and_keeps_the_words(markdown: str) -> None:
    shown = render_whatsapp(markdown)
    for word in markdown.split():
        if word.isalnum():
            assert word in shown


@given(st.text(max_size=9000))
def test_chunks_fit_the_api_limit(markdown: str) -> None:
    assert all(len(text) <= MAX_TEXT for _, text in rendered_chunks(markdown, 4096))


@given(st.binary(max_size=512), st.text(min_size=1, max_size=40))
def test_only_the_exact_body_and_secret_pass_the_signature(body: bytes, secret: str) -> None:
    good = signature(secret, body)
    assert signature_ok(secret, body, good)
    assert not signature_ok(secret, body + b" ", good)
    assert not signature_ok(secret + "x", body, good)
    assert not signature_ok(secret, body, None)
    assert not signature_ok(secret, body, good.replace("sha256=", "sha1="))
    assert not signature_ok("", body, signature("", body))  # no secret: nothing passes


def test_allow_from_takes_e164_numbers_and_keeps_them_as_wa_ids() -> None:
    options = WhatsAppOptions(allow_from=["+1 (555) 010-0001", "15550100002", "*"])
    assert options.allow_from == ["15550100001", "15550100002", "*"]
    assert wa_id("+44 20 7946 0958") == "442079460958"
    with pytest.raises(ValidationError, match="not a phone number"):
        WhatsAppOptions(allow_from=["alice"])


def test_an_enabled_channel_names_the_missing_key() -> None:
    with pytest.raises(ValidationError, match=r"channels\.whatsapp\.app_secret is empty"):
        WhatsAppOptions(enabled=True, phone_number_id="1065", access_token="EAA", verify_token="v")
    with pytest.raises(ValidationError, match="numeric Phone number ID"):
        WhatsAppOptions(
            enabled=True,
            phone_number_id="+15550109999",
            access_token="EAA",
            app_secret="s",
            verify_token="v",
        )


def test_events_for_another_number_are_not_ours() -> None:
    body, _ = wa.text("hello")
    assert len(read_events(body, wa.PHONE_NUMBER_ID).messages) == 1
    assert read_events(body, "999").messages == []
    [message] = read_events(body, wa.PHONE_NUMBER_ID).messages
    assert message.profile_name == "Alice"


def test_a_failed_status_carries_metas_code_and_reason() -> None:
    body = wa.statuses([wa.failed_status("wamid.X", wa.ALICE, 131047)])
    [status] = read_events(body, wa.PHONE_NUMBER_ID).statuses
    assert (status.message_id, status.status, status.error_code) == ("wamid.X", "failed", 131047)
    assert "24 hours" in status.error


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(json_values)
def test_any_json_body_is_read_without_an_error(payload: object) -> None:
    events = read_events(payload, wa.PHONE_NUMBER_ID)
    assert isinstance(events.messages, list) and isinstance(events.statuses, list)


def test_held_messages_are_kept_in_order_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "held.json"
    held = HeldMessages(path)
    held.hold("1555", "first")
    held.hold("1666", "other person")
    held.hold("1555", "second")
    assert path.stat().st_mode & 0o777 == 0o600
    again = HeldMessages(path)
    assert (len(again), again.recipients()) == (3, 2)
    assert [h.text for h in again.take("1555")] == ["first", "second"]
    assert [h.to for h in HeldMessages(path).take("1666")] == ["1666"]
    assert len(HeldMessages(path)) == 0


def test_an_unreadable_held_file_is_set_aside_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "held.json"
    path.write_text("{not json")
    assert len(HeldMessages(path)) == 0
    assert (tmp_path / "held.json.bad").read_text() == "{not json"
    path.write_text(json.dumps([{"to": "1", "text": "t", "held_at": 1.0}]))
    assert len(HeldMessages(path)) == 1


def test_the_window_closes_24_hours_after_the_person_last_wrote() -> None:
    window = ServiceWindow()
    assert not window.closed("1555")  # never seen: the API decides
    window.opened("1555", at=1_000.0)
    assert not window.closed("1555", now=1_000.0 + 23 * 3600)
    assert window.closed("1555", now=1_000.0 + 24 * 3600)
