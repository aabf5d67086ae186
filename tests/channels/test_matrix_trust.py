"""The Matrix cross-signing rule (`channels.matrix.trust.cross_signed`): which devices a
person's identity vouches for, against a pinned master key, with real Ed25519 signatures;
and `device_trust: cross_signing` end to end on Synapse."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from channels.matrix.trust import cross_signed
from tests.fakes.anthropic import FakeAnthropic, last_user_text
from tests.matrix_daemon import alice, bot, daemon, model
from tests.matrix_identity import Identity, public, verify
from tests.matrix_server import MatrixUser, SynapseServer, synapse_server
from tests.matrix_support import Person
from tests.waiting import eventually

__all__ = ["alice", "bot", "model", "synapse_server"]  # fixtures, used by name

ALICE = "@alice:example.org"


def _device(device_id: str) -> dict[str, Any]:
    return {
        "user_id": ALICE,
        "device_id": device_id,
        "algorithms": ["m.olm.v1.curve25519-aes-sha2", "m.megolm.v1.aes-sha2"],
        "keys": {f"ed25519:{device_id}": "ed-" + device_id, f"curve25519:{device_id}": "cv"},
        "signatures": {ALICE: {f"ed25519:{device_id}": "self-signed"}},
    }


def _answer(identity: Identity, devices: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "device_keys": {ALICE: devices},
        "master_keys": {ALICE: identity.master_object()},
        "self_signing_keys": {ALICE: identity.self_signing_object()},
    }


def test_only_the_devices_the_identity_signed_are_vouched_for() -> None:
    alice = Identity(ALICE)
    keys = _answer(alice, {"PHONE": alice.sign_device(_device("PHONE")), "NEW": _device("NEW")})
    found = cross_signed(ALICE, keys, None, verify)
    assert found.devices == {"PHONE"}
    assert found.master_key == public(alice.master) and not found.problem


def test_a_changed_identity_vouches_for_nothing() -> None:
    before, after = Identity(ALICE), Identity(ALICE)
    keys = _answer(after, {"PHONE": after.sign_device(_device("PHONE"))})
    found = cross_signed(ALICE, keys, public(before.master), verify)
    assert found.devices == frozenset()
    assert found.master_key == public(before.master)
    assert "changed" in found.problem


def test_a_self_signing_key_the_master_did_not_sign_vouches_for_nothing() -> None:
    alice, mallory = Identity(ALICE), Identity(ALICE)
    keys = _answer(alice, {"PHONE": mallory.sign_device(_device("PHONE"))})
    keys["self_signing_keys"] = {ALICE: mallory.self_signing_object()}  # signed by another
    found = cross_signed(ALICE, keys, None, verify)
    assert found.devices == frozenset() and "self-signing" in found.problem


def test_a_device_signature_altered_after_signing_is_refused() -> None:
    alice = Identity(ALICE)
    signed = alice.sign_device(_device("PHONE"))
    signed["keys"]["ed25519:PHONE"] = "swapped"
    assert cross_signed(ALICE, _answer(alice, {"PHONE": signed}), None, verify).devices == set()


def test_no_identity_or_nonsense_vouches_for_nothing() -> None:
    assert "no cross-signing" in cross_signed(ALICE, {}, None, verify).problem
    nonsense: dict[str, Any] = {
        "master_keys": {ALICE: {"usage": ["master"], "keys": {"a": 1, "b": 2}}},
        "self_signing_keys": {ALICE: "x"},
        "device_keys": {ALICE: {"D": "y"}},
    }
    assert cross_signed(ALICE, nonsense, None, verify).devices == frozenset()


@pytest.mark.timeout(120)
async def test_with_cross_signing_only_a_device_its_owner_signed_is_answered(
    tmp_path: Path,
    model: FakeAnthropic,
    synapse_server: SynapseServer,
    bot: MatrixUser,
    alice: MatrixUser,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "channels.matrix")
    strict = {"device_trust": "cross_signing"}
    async with (
        daemon(tmp_path, model, synapse_server, bot, [alice.user_id], **strict),
        Person(synapse_server, alice, tmp_path / "alice", encrypted=True) as person,
    ):
        room = await person.open_dm(bot.user_id, encrypted=True)
        await person.say(room, "from a device nobody signed")
        await eventually(lambda: "not verified with cross-signing" in caplog.text, 20)
        identity = Identity(alice.user_id)
        await identity.publish(
            synapse_server.url, alice.access_token, alice.password, alice.device_id
        )
        await person.say(room, "from a signed device")
        await person.wait(lambda: person.texts(room) == ["echo: from a signed device"])
        assert [last_user_text(r) for r in model.requests] == ["from a signed device"]
        assert f"trusting {alice.user_id}'s device {alice.device_id} (cross-signed)" in caplog.text
    [pins] = (tmp_path / "data" / "matrix").glob("*/identities.json")
    assert public(identity.master) in pins.read_text()
