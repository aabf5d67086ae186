"""A person's Matrix cross-signing identity in tests: a master key and a self-signing key
(Ed25519, made with `cryptography`), the key objects the spec defines, signatures over
canonical JSON, and the uploads to a real homeserver that publish them
(`/keys/device_signing/upload`, `/keys/signatures/upload`).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import aiohttp
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def canonical(obj: dict[str, Any]) -> bytes:
    """The signed form of a key object: no `signatures`, no `unsigned`, canonical JSON."""
    bare = {k: v for k, v in obj.items() if k not in ("signatures", "unsigned")}
    return json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def public(key: Ed25519PrivateKey) -> str:
    return b64(key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))


def sign(obj: dict[str, Any], user_id: str, key: Ed25519PrivateKey) -> dict[str, Any]:
    """`obj` with `key`'s signature added under `signatures.<user>.ed25519:<public key>`."""
    signed = copy.deepcopy(obj)
    signature = b64(key.sign(canonical(obj)))
    signed.setdefault("signatures", {}).setdefault(user_id, {})[f"ed25519:{public(key)}"] = (
        signature
    )
    return signed


def verify(obj: dict[str, Any], key: str, user_id: str, key_id: str) -> bool:
    """Checks one Ed25519 signature as nio's `verify_json` does (the rule's `verify`)."""
    try:
        signature = obj["signatures"][user_id][f"ed25519:{key_id}"]
        raw = base64.b64decode(key + "=" * (-len(key) % 4))
        Ed25519PublicKey.from_public_bytes(raw).verify(
            base64.b64decode(signature + "=" * (-len(signature) % 4)), canonical(obj)
        )
    except Exception:
        return False
    return True


class Identity:
    """One person's cross-signing keys."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.master = Ed25519PrivateKey.generate()
        self.self_signing = Ed25519PrivateKey.generate()

    def master_object(self) -> dict[str, Any]:
        key = public(self.master)
        return {"user_id": self.user_id, "usage": ["master"], "keys": {f"ed25519:{key}": key}}

    def self_signing_object(self) -> dict[str, Any]:
        key = public(self.self_signing)
        bare = {"user_id": self.user_id, "usage": ["self_signing"], "keys": {f"ed25519:{key}": key}}
        return sign(bare, self.user_id, self.master)

    def sign_device(self, device_keys: dict[str, Any]) -> dict[str, Any]:
        return sign(device_keys, self.user_id, self.self_signing)

    async def publish(
        self, homeserver: str, access_token: str, password: str, device_id: str
    ) -> None:
        """Upload the identity and sign the device `device_id` with it."""
        auth = {"Authorization": f"Bearer {access_token}"}
        body: dict[str, Any] = {
            "master_key": self.master_object(),
            "self_signing_key": self.self_signing_object(),
        }
        async with aiohttp.ClientSession(headers=auth) as http:
            upload = f"{homeserver}/_matrix/client/v3/keys/device_signing/upload"
            async with http.post(upload, json=body) as response:
                answer = await response.json()
            if response.status == 401:  # user-interactive auth: the password
                body["auth"] = {
                    "type": "m.login.password",
                    "identifier": {"type": "m.id.user", "user": self.user_id},
                    "password": password,
                    "session": answer.get("session"),
                }
                async with http.post(upload, json=body) as response:
                    answer = await response.json()
            assert response.status == 200, answer
            query = f"{homeserver}/_matrix/client/v3/keys/query"
            async with http.post(query, json={"device_keys": {self.user_id: [device_id]}}) as got:
                device_keys = (await got.json())["device_keys"][self.user_id][device_id]
            signed = self.sign_device(device_keys)
            signatures = {self.user_id: {device_id: signed}}
            url = f"{homeserver}/_matrix/client/v3/keys/signatures/upload"
            async with http.post(url, json=signatures) as response:
                answer = await response.json()
            assert response.status == 200 and not answer.get("failures"), answer
