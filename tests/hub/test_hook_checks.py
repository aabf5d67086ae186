"""The webhook's checks as pure functions: signatures (table and properties), the message
template, the rate window."""

from __future__ import annotations

import hashlib
import hmac
import json

from hypothesis import given
from hypothesis import strategies as st

from bot.web.hook_checks import (
    CUT_MARK,
    RateWindow,
    check_signature,
    render_message,
    sign,
)

SECRET = "a-secret-of-16-chars"
NOW = 1_800_000_000.0


def test_github_signature_is_the_hex_hmac_sha256_of_the_raw_body() -> None:
    body = b'{"zen": "Keep it logically awesome."}'
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert sign(SECRET, body) == expected
    assert check_signature("github", SECRET, {"X-Hub-Signature-256": expected}, body, NOW) is None


def test_signature_refusals_say_why() -> None:
    body = b"{}"
    good = sign(SECRET, body)
    cases = [
        ("github", {}, "missing X-Hub-Signature-256"),
        ("github", {"X-Hub-Signature-256": "sha256=00"}, "wrong signature"),
        ("github", {"X-Hub-Signature-256": good.upper()}, "wrong signature"),
        ("perch", {"X-Perch-Signature": good}, "missing X-Perch-Signature or X-Perch-Timestamp"),
        ("perch", {"X-Perch-Signature": good, "X-Perch-Timestamp": "1"}, "wrong signature"),
    ]
    for scheme, headers, why in cases:
        assert check_signature(scheme, SECRET, headers, body, NOW) == why  # type: ignore[arg-type]


def test_perch_signature_covers_the_timestamp_and_holds_five_minutes() -> None:
    body = b"ping"
    for offset, ok in [(0, True), (299, True), (-299, True), (301, False), (-301, False)]:
        stamp = str(int(NOW + offset))
        headers = {"X-Perch-Timestamp": stamp, "X-Perch-Signature": sign(SECRET, body, stamp)}
        assert (check_signature("perch", SECRET, headers, body, NOW) is None) is ok
    stamp = str(int(NOW))
    moved = {"X-Perch-Timestamp": str(int(NOW) + 1), "X-Perch-Signature": sign(SECRET, body, stamp)}
    assert check_signature("perch", SECRET, moved, body, NOW) == "wrong signature"
    nan = {"X-Perch-Timestamp": "nan", "X-Perch-Signature": sign(SECRET, body, "nan")}
    assert check_signature("perch", SECRET, nan, body, NOW) is not None


@given(st.binary(max_size=300), st.binary(min_size=1, max_size=8))
def test_any_change_to_the_body_breaks_a_signature(body: bytes, extra: bytes) -> None:
    headers = {"X-Hub-Signature-256": sign(SECRET, body)}
    assert check_signature("github", SECRET, headers, body, NOW) is None
    assert check_signature("github", SECRET, headers, body + extra, NOW) == "wrong signature"


@given(st.text(max_size=80), st.text(max_size=80))
def test_no_header_value_crashes_the_check(signature: str, stamp: str) -> None:
    headers = {"X-Perch-Signature": signature, "X-Perch-Timestamp": stamp}
    assert check_signature("perch", SECRET, headers, b"x", NOW) is not None
    assert (
        check_signature("github", SECRET, {"X-Hub-Signature-256": signature}, b"x", NOW) is not None
    )


def test_the_message_template_reads_body_json_and_headers() -> None:
    body = json.dumps({"a": {"b": [10, {"c": "deep"}]}, "n": None}).encode()
    headers = {"X-Event": "push"}
    cases = [
        ("{body}", body.decode()),
        ("{json.a.b.1.c}", "deep"),
        ("{json.a.b}", '[10, {"c": "deep"}]'),
        ("{json.missing.x}", ""),
        ("{json.n}", ""),
        ("{headers.X-Event} on {name}", "push on gh"),
        ("{headers.X-Nope}!", "!"),
        ("{other} {json a}", "{other} {json a}"),
    ]
    for template, expected in cases:
        got = render_message(template, name="gh", body=body, headers=headers, max_chars=1000)
        assert got == expected, template


def test_the_message_is_cut_to_its_size_and_a_body_not_json_is_no_error() -> None:
    text = render_message("{body}", name="x", body=b"y" * 500, headers={}, max_chars=100)
    assert len(text) == 100 and text.endswith(CUT_MARK)
    assert render_message("[{json.a}]", name="x", body=b"\xff{", headers={}, max_chars=100) == "[]"


@given(st.text(max_size=200), st.binary(max_size=200), st.integers(min_value=100, max_value=400))
def test_a_rendered_message_never_exceeds_its_size(template: str, body: bytes, size: int) -> None:
    assert len(render_message(template, name="n", body=body, headers={}, max_chars=size)) <= size


def test_the_rate_window_admits_per_minute_and_frees_as_calls_age() -> None:
    now = [0.0]
    rate = RateWindow(2, lambda: now[0])
    assert [rate.admit(), rate.admit(), rate.admit()] == [True, True, False]
    assert rate.retry_after() == 60
    now[0] = 59.5
    assert not rate.admit()
    now[0] = 60.0
    assert rate.admit()
