"""The email channel's pure rules: headers, threads, trimming, loop guards, the hourly budget,
who is believed, and the options' TLS rule. Tables for the cases people write, hypothesis
for the properties that must hold for any input."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from channels.email.authenticity import aligned, believed, dkim_signature_ok, server_verdict
from channels.email.body import html_to_text, trim_reply
from channels.email.guards import ReplyBudget, why_not_answer
from channels.email.headers import (
    MAX_REFERENCES,
    message_ids,
    references_for_reply,
    reply_subject,
    sender,
    thread_root,
)
from channels.email.inbound import parse
from channels.email.options import EmailOptions

BOT = "perch@example.com"
ids = st.from_regex(r"[a-z0-9.]{1,12}@[a-z]{1,8}\.test", fullmatch=True)


def message(headers: dict[str, str], body: str = "hi") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "Alice <alice@example.org>"
    msg["To"] = BOT
    for name, value in headers.items():
        msg[name] = value
    msg.set_content(body)
    return msg


# -- headers and threads -----------------------------------------------------------------


@given(st.lists(ids, min_size=1, max_size=40, unique=True))
def test_a_thread_keeps_its_root_and_the_reply_chain_stays_bounded(chain: list[str]) -> None:
    msg = message({"References": " ".join(f"<{i}>" for i in chain[:-1]) or f"<{chain[0]}>",
                   "Message-ID": f"<{chain[-1]}>"})  # fmt: skip
    raw = msg.as_bytes()
    assert thread_root(msg, raw) == chain[0]
    refs = references_for_reply(msg, raw)
    assert refs[0] == chain[0] and refs[-1] == chain[-1]
    assert len(refs) <= MAX_REFERENCES and len(set(refs)) == len(refs)


def test_a_first_mail_is_its_own_root_and_a_mail_without_id_gets_a_stable_one() -> None:
    first = message({"Message-ID": "<a@x.test>"})
    assert thread_root(first, first.as_bytes()) == "a@x.test"
    bare = message({})
    raw = bare.as_bytes()
    assert thread_root(bare, raw) == thread_root(parse(raw), raw)
    assert thread_root(bare, raw).endswith("@perch.invalid")
    replied = message({"In-Reply-To": "<p@x.test>"})
    assert thread_root(replied, replied.as_bytes()) == "p@x.test"


@given(st.text(max_size=200))
def test_message_ids_never_raise_and_hold_no_brackets(value: str) -> None:
    for found in message_ids(value):
        assert "<" not in found and ">" not in found and found


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Plans", "Re: Plans"),
        ("Re: Plans", "Re: Plans"),
        ("RE: AW: Re[2]: Plans", "Re: Plans"),
        ("", "Re: your message"),
        ("  Lunch   at   noon ", "Re: Lunch at noon"),
    ],
)
def test_reply_subjects_fold_their_prefixes(subject: str, expected: str) -> None:
    assert reply_subject(subject) == expected


@given(st.text(max_size=80))
def test_a_reply_subject_has_exactly_one_prefix(subject: str) -> None:
    once = reply_subject(subject)
    assert once.startswith("Re: ") and reply_subject(once) == once


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"Alice A." <Alice@Example.ORG>', ("alice@example.org", "Alice A.")),
        ("bob@example.org", ("bob@example.org", "")),
        ("a@x.org, b@x.org", ("", "")),  # no single sender
        ("undisclosed-recipients:;", ("", "")),
        ("not an address", ("", "")),
    ],
)
def test_the_sender_is_one_plain_address_in_lower_case(
    value: str, expected: tuple[str, str]
) -> None:
    msg = EmailMessage()
    msg["From"] = value
    assert sender(msg) == expected


# -- what a person wrote -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Yes, Tuesday.\n\nOn Mon, 2 Mar 2026 at 10:00, Perch <p@x.test> wrote:\n> When?\n",
         "Yes, Tuesday."),
        ("Ja.\n\nAm 02.03.2026 um 10:00 schrieb Perch <p@x.test>:\n> Wann?", "Ja."),
        ("Sure\n\n-----Original Message-----\nFrom: Perch\nSent: today\n", "Sure"),
        ("Fine\n\nFrom: Perch <p@x.test>\nSent: Monday\nTo: me\nSubject: x\n\nold", "Fine"),
        ("Thanks!\n-- \nAlice\nPhone 123", "Thanks!"),
        ("> you said x\nI disagree\n> and y\nNo.", "> you said x\nI disagree\n> and y\nNo."),
        ("Ok\n> quoted at the end\n> more\n", "Ok"),
        ("> only a quote", "> only a quote"),  # nothing else: kept, never emptied
    ],
)  # fmt: skip
def test_quoted_history_and_signatures_are_trimmed(text: str, kept: str) -> None:
    assert trim_reply(text) == kept


@given(st.text(max_size=400))
def test_trimming_keeps_a_prefix_and_never_empties_a_text(text: str) -> None:
    trimmed = trim_reply(text)
    normalised = text.replace("\r\n", "\n")
    assert normalised.startswith(trimmed) or trimmed == text.rstrip()
    if text.strip():
        assert trimmed.strip()
    assert trim_reply(trimmed) == trimmed or trimmed == text.rstrip()


def test_html_mail_becomes_readable_text() -> None:
    html = (
        "<html><head><style>p {color: red}</style><script>alert(1)</script></head><body>"
        "<p>Hello <b>there</b>,</p><ul><li>one</li><li>two</li></ul>"
        '<p>see <a href="https://example.org/x">the page</a><br>bye</p></body></html>'
    )
    text = html_to_text(html)
    assert "alert" not in text and "color" not in text
    assert "Hello there," in text and "• one" in text and "• two" in text
    assert "the page (https://example.org/x)" in text and text.endswith("bye")


@given(st.text(max_size=300))
def test_any_html_gives_text_without_raising(html: str) -> None:
    assert isinstance(html_to_text(html), str)


# -- never answered ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Auto-Submitted": "auto-replied"}, "Auto-Submitted: auto-replied"),
        ({"Auto-Submitted": "auto-generated; owner-email=x"}, "Auto-Submitted: auto-generated"),
        ({"Precedence": "bulk"}, "Precedence: bulk"),
        ({"Precedence": "List"}, "Precedence: list"),
        ({"Precedence": "junk"}, "Precedence: junk"),
        ({"List-Id": "<dev.lists.example.org>"}, "mailing list (List-Id)"),
        ({"List-Unsubscribe": "<mailto:u@x.org>"}, "mailing list (List-Unsubscribe)"),
        ({"Return-Path": "<>"}, "bounce (null return path)"),
        ({"X-Autoreply": "yes"}, "auto-responder (X-Autoreply)"),
        ({"X-Auto-Response-Suppress": "OOF"}, "auto-responder (X-Auto-Response-Suppress)"),
    ],
)
def test_robots_and_lists_are_not_answered(headers: dict[str, str], reason: str) -> None:
    assert why_not_answer(message(headers), BOT) == reason


@pytest.mark.parametrize(
    ("sender_line", "reason"),
    [
        ("MAILER-DAEMON@mx.example.org", "robot sender mailer-daemon@mx.example.org"),
        ("no-reply@shop.example", "robot sender no-reply@shop.example"),
        ("Perch <PERCH@example.com>", "sent by Perch's own address"),
        ("a@x.org, b@x.org", "no single usable From address"),
    ],
)
def test_robot_senders_and_our_own_address_are_not_answered(sender_line: str, reason: str) -> None:
    msg = message({})
    msg.replace_header("From", sender_line)
    assert why_not_answer(msg, BOT) == reason


def test_a_person_is_answered() -> None:
    assert (
        why_not_answer(message({"Auto-Submitted": "no", "Return-Path": "<a@x.org>"}), BOT) is None
    )


@given(st.sampled_from(["Auto-Submitted", "Precedence", "List-Id", "X-Autoreply"]),
       st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20))  # fmt: skip
def test_a_robot_header_is_never_answered_whatever_its_value(name: str, value: str) -> None:
    reason = why_not_answer(message({name: value}), BOT)
    if name == "Auto-Submitted":
        assert (reason is None) == (value.split(";")[0].strip().lower() == "no")
    elif name == "Precedence":
        assert (reason is None) == (value.strip().lower() not in {"bulk", "list", "junk"})
    else:
        assert reason is not None


@given(st.lists(st.floats(min_value=0, max_value=10_000), max_size=60), st.integers(1, 5))
def test_the_budget_never_lets_more_than_n_through_in_any_hour(
    times: list[float], per_hour: int
) -> None:
    budget = ReplyBudget(per_hour)
    allowed = [t for t in sorted(times) if budget.take("a@x.org", now=t)]
    for start in allowed:
        assert len([t for t in allowed if start <= t < start + 3600]) <= per_hour
    assert budget.take("someone-else@x.org", now=0.0)


# -- who is believed ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("results", "verdict"),
    [
        (["mx.example.com; dmarc=pass header.from=example.org"], True),
        (["mx.example.com; dkim=pass header.d=example.org; dmarc=none"], True),
        (["mx.example.com; dkim=pass header.d=mail.example.org"], False),  # not aligned
        (["mx.example.com; dkim=pass header.d=evil.test; spf=pass"], False),
        (["mx.example.com; dmarc=fail", "forged; dmarc=pass"], False),  # only the top one
        (["mx.example.com; spf=pass smtp.mailfrom=example.org"], None),
        ([], None),
    ],
)
def test_the_servers_verdict_is_read_from_the_topmost_header(
    results: list[str], verdict: bool | None
) -> None:
    msg = message({})
    for value in results:
        msg["Authentication-Results"] = value
    assert server_verdict(msg, "example.org") is verdict


def test_alignment_is_relaxed_to_parent_domains_only() -> None:
    assert aligned("example.org", "mail.example.org")
    assert not aligned("mail.example.org", "example.org")
    assert not aligned("ample.org", "example.org")
    assert not aligned("", "example.org")


async def test_require_auth_decides_whom_to_believe() -> None:
    plain = message({})
    raw = plain.as_bytes()
    assert await believed(plain, raw, "example.org", "none")
    assert not await believed(plain, raw, "example.org", "dmarc")
    assert not await believed(plain, raw, "example.org", "dkim", dns=lambda *a, **k: None)


def test_a_dkim_signature_is_checked_and_aligned() -> None:
    dkim = pytest.importorskip("dkim")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    import base64

    record = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)

    def dns(name: bytes, timeout: int = 5) -> bytes | None:
        return record if name == b"sel._domainkey.example.org." else None

    raw = message({"Subject": "hi", "Message-ID": "<s@example.org>"}).as_bytes()
    signature = dkim.sign(raw, b"sel", b"example.org", private,
                          include_headers=[b"from", b"to", b"subject"])  # fmt: skip
    signed = signature + raw
    assert dkim_signature_ok(signed, "example.org", dns)
    assert not dkim_signature_ok(signed, "other.org", dns)  # a valid signature, wrong domain
    tampered = signed.replace(b"hi\n", b"ho\n")
    assert not dkim_signature_ok(tampered, "example.org", dns)


# -- options -----------------------------------------------------------------------------


def settings(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "enabled": True,
        "address": BOT,
        "imap": {"host": "imap.example.com", "password": "p"},
        "smtp": {"host": "smtp.example.com", "password": "p"},
    }
    base.update(extra)
    return base


def test_tls_none_is_refused_beyond_loopback() -> None:
    with pytest.raises(ValidationError, match=r"channels.email.imap.tls is none"):
        EmailOptions.model_validate(
            settings(imap={"host": "imap.example.com", "password": "p", "tls": "none"})
        )
    local = EmailOptions.model_validate(
        settings(smtp={"host": "127.0.0.1", "password": "p", "tls": "none"})
    )
    assert local.smtp.real_port() == 25 and local.imap.real_port() == 993


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"address": "nobody"}, "channels.email.address"),
        ({"imap": {"password": "p"}}, "channels.email.imap.host"),
        ({"smtp": {"host": "smtp.example.com"}}, "channels.email.smtp.password"),
        ({"imap": {"host": "h", "password": "p", "tls": "plain"}}, "imap.tls"),
    ],
)
def test_bad_options_name_their_key(extra: dict[str, object], error: str) -> None:
    with pytest.raises(ValidationError, match=error.replace(".", r"\.")):
        EmailOptions.model_validate(settings(**extra))


def test_allow_from_takes_addresses_and_domains_without_regard_to_case() -> None:
    options = EmailOptions.model_validate(settings(allow_from=["Alice@Example.org", "@Corp.test"]))
    assert options.allows("alice@example.org") and options.allows("bob@corp.test")
    assert not options.allows("bob@sub.corp.test") and not options.allows("eve@example.org")
    assert options.owner_ids() == ("alice@example.org",)


def test_the_nested_passwords_are_secrets_the_logs_never_show() -> None:
    from channels.options import is_secret_field, secret_values

    options = EmailOptions.model_validate(
        settings(
            imap={"host": "h", "password": "imap-pw"}, smtp={"host": "h", "password": "smtp-pw"}
        )
    )
    assert sorted(secret_values(options)) == ["imap-pw", "smtp-pw"]
    assert is_secret_field(EmailOptions, "imap.password")
    assert not is_secret_field(EmailOptions, "imap.host") and not is_secret_field(
        EmailOptions, "x.y"
    )


@given(st.text(max_size=200), st.text(max_size=200))
def test_the_html_part_never_carries_markup_from_the_text(before: str, after: str) -> None:
    from channels.email.render import render_email_html

    page = render_email_html(f"{before}<script>alert(1)</script>[x](javascript:alert(1)){after}")
    assert "<script" not in page.lower() and 'href="javascript' not in page.lower()
