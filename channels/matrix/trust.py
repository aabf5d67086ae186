"""Whose devices the bot trusts (`device_trust`), and so whose encrypted messages it answers.

- `tofu` (trust on first use, the default): every device is trusted the first time its keys
  are seen, so a new phone of someone allowed is answered at once.
- `cross_signing`: a device is trusted when its owner's self-signing key signed it, that key
  being signed by the owner's master key, and the master key being the one first seen for
  that person (pinned in the state folder, as Element pins other people's identities). A
  new device its owner has not verified with another of theirs is not answered (one log
  line); a person whose master key changed is not answered until the pin is removed
  (`identities.json`).

`cross_signed(user, keys, pinned, verify)` is the rule, pure: `keys` is a `/keys/query`
answer and `verify(obj, public_key, user, key_id)` checks one Ed25519 signature (nio's).
`DeviceTrust` applies it: after each round of key queries (`settle`) and for a message from
a device not trusted yet (`admits`, which asks the homeserver first).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import nio

from channels.matrix.options import MatrixOptions
from channels.matrix.state import AccountState

log = logging.getLogger("channels.matrix")

KEYS_QUERY = "/_matrix/client/v3/keys/query"
Verify = Callable[[dict[str, Any], str, str, str], bool]


@dataclass(frozen=True, slots=True)
class CrossSigned:
    """What a person's cross-signing keys vouch for: device ids, the master key, or why not."""

    devices: frozenset[str]
    master_key: str | None
    problem: str = ""


def _only_key(key_object: Any, usage: str) -> str | None:
    if not isinstance(key_object, dict) or usage not in (key_object.get("usage") or []):
        return None
    keys = key_object.get("keys")
    if not isinstance(keys, dict) or len(keys) != 1:
        return None
    [value] = keys.values()
    return value if isinstance(value, str) else None


def _signed(verify: Verify, obj: Any, key: str, user_id: str) -> bool:
    if not isinstance(obj, dict):
        return False
    try:
        return verify(copy.deepcopy(obj), key, user_id, key)
    except Exception:  # a malformed key or signature is no signature
        return False


def cross_signed(
    user_id: str, keys: dict[str, Any], pinned: str | None, verify: Verify
) -> CrossSigned:
    """The devices of `user_id` that the user's cross-signing keys in `keys` vouch for."""
    master = _only_key((keys.get("master_keys") or {}).get(user_id), "master")
    if master is None:
        return CrossSigned(frozenset(), None, "has no cross-signing identity")
    if pinned is not None and master != pinned:
        return CrossSigned(frozenset(), pinned, "changed their cross-signing identity")
    self_signing_object = (keys.get("self_signing_keys") or {}).get(user_id)
    self_signing = _only_key(self_signing_object, "self_signing")
    if self_signing is None or not _signed(verify, self_signing_object, master, user_id):
        return CrossSigned(frozenset(), master, "has no self-signing key signed by their identity")
    devices = (keys.get("device_keys") or {}).get(user_id) or {}
    vouched = frozenset(
        device_id
        for device_id, device_keys in devices.items()
        if _signed(verify, device_keys, self_signing, user_id)
    )
    return CrossSigned(vouched, master)


class DeviceTrust:
    """Applies `device_trust` to the devices nio knows (see the module docstring)."""

    def __init__(self, options: MatrixOptions, state: AccountState) -> None:
        self._mode = options.device_trust
        self._state = state
        self._pinned = state.identities()
        self._noted: set[tuple[str, str]] = set()
        self._checked: frozenset[tuple[str, str]] = frozenset()

    async def settle(self, client: nio.AsyncClient, *, fresh: bool) -> None:
        """Trust what the mode trusts among the devices not trusted yet. Cross-signing keys
        are asked for only when keys were just queried (`fresh`: something changed) or the
        untrusted devices are not those asked about last time."""
        if client.olm is None:
            return
        waiting = [d for d in client.device_store if not (d.verified or d.blacklisted or d.deleted)]
        if not waiting:
            return
        checked = frozenset((d.user_id, d.id) for d in waiting)
        if self._mode == "cross_signing" and not fresh and checked == self._checked:
            return
        self._checked = checked
        if self._mode == "tofu":
            for device in waiting:
                client.verify_device(device)
                log.info("matrix: trusting %s's device %s on first use", device.user_id, device.id)
            return
        await self._cross_check(client, sorted({d.user_id for d in waiting}))

    async def admits(self, client: nio.AsyncClient, event: nio.Event) -> bool:
        """True if a decrypted message's sending device is trusted (asked of the homeserver
        when not yet); always True for messages that were not encrypted, and under `tofu`."""
        if not event.decrypted or self._mode == "tofu" or client.olm is None:
            return True
        device = self._sender_device(client, event)
        if device is None or not device.verified:
            if client.should_query_keys:
                await client.keys_query()
            await self._cross_check(client, [event.sender])
            device = self._sender_device(client, event)
        if device is not None and device.verified:
            return True
        name = device.id if device is not None else "unknown"
        if (event.sender, name) not in self._noted:
            self._noted.add((event.sender, name))
            log.warning(
                "matrix: %s wrote from device %s, which they have not verified with "
                "cross-signing; not answered (device_trust: cross_signing)",
                event.sender,
                name,
            )
        return False

    def _sender_device(self, client: nio.AsyncClient, event: nio.Event) -> Any:
        if event.sender_key is None:
            return None
        return client.device_store.device_from_sender_key(event.sender, event.sender_key)

    async def _cross_check(self, client: nio.AsyncClient, users: list[str]) -> None:
        assert client.olm is not None
        keys = await _query_keys(client, users)
        if keys is None:
            return
        for user in users:
            found = cross_signed(user, keys, self._pinned.get(user), client.olm.verify_json)
            if found.master_key is not None and user not in self._pinned:
                self._pinned[user] = found.master_key
                self._state.save_identities(self._pinned)
            if found.problem and (user, found.problem) not in self._noted:
                self._noted.add((user, found.problem))
                log.warning("matrix: %s %s; their devices are not trusted", user, found.problem)
            known = client.device_store[user] if user in client.device_store.users else {}
            for device_id in found.devices:
                device = known.get(device_id)
                ed25519 = (keys["device_keys"][user][device_id].get("keys") or {}).get(
                    f"ed25519:{device_id}"
                )
                if device is not None and not device.verified and device.ed25519 == ed25519:
                    client.verify_device(device)
                    log.info("matrix: trusting %s's device %s (cross-signed)", user, device_id)


async def _query_keys(client: nio.AsyncClient, users: list[str]) -> dict[str, Any] | None:
    """A `/keys/query` answer with the cross-signing keys nio does not keep, or None."""
    session = client.client_session
    if session is None:
        return None
    try:
        async with session.post(
            client.homeserver + KEYS_QUERY,
            json={"device_keys": {user: [] for user in users}},
            headers={"Authorization": f"Bearer {client.access_token}"},
        ) as response:
            data = await response.json(content_type=None)
    except Exception as exc:
        log.warning("matrix: could not ask for %s's cross-signing keys: %s", ", ".join(users), exc)
        return None
    return data if isinstance(data, dict) else None
