"""The Matrix channel's settings (`channels.matrix` in config.yaml), checked when it loads.

Owns `MatrixOptions`, the config model the adapter runs on. Every refusal names the
`channels.matrix` key at fault and says what to put there. `allow_from` holds Matrix user ids
(`@alice:example.org`) and `groups` room ids (`!abc:example.org`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from channels.options import ChannelPolicy, Secret

_USER_ID = re.compile(r"^@[^:\s]+:[^\s]+$")
_ROOM_ID = re.compile(r"^![^:\s]+(?::[^\s]+)?$")  # room v12 ids name no server


class MatrixOptions(ChannelPolicy):
    """Configuration of the Matrix channel (`channels.matrix` in config.yaml).

    `homeserver` is the client-server API base (`https://matrix.example.org`). Give
    `access_token` (the device's token, from Element or a login) or `password` (Perch logs in
    once as `device_name` and keeps the device it gets in its state directory). `encryption`
    makes the bot read and write end-to-end encrypted rooms, with its keys in the state
    directory; `device_trust` says whose devices it answers: `tofu` (trust on first use: a
    device is trusted the first time it is seen) or `cross_signing` (a device its owner
    verified with their cross-signing identity, pinned on first sight; see `trust.py`). `auto_thread` answers a room mention in a thread started from it
    (one session per thread). The tuning knobs below rarely need changing; tests shorten them.
    """

    homeserver: str = ""
    user_id: str = ""
    access_token: Secret = ""
    password: Secret = ""
    device_name: str = "Perch"
    encryption: bool = True
    device_trust: Literal["tofu", "cross_signing"] = "tofu"
    auto_thread: bool = True
    chunk_limit: Annotated[int, Field(ge=100, le=30_000)] = 4000
    stream_interval: Annotated[float, Field(gt=0)] = 3.0  # see stream.py: Synapse's rc_message
    typing_interval: Annotated[float, Field(gt=0)] = 20.0  # the notice is sent for 30 s
    sync_timeout: Annotated[float, Field(gt=0)] = 30.0  # the long poll of /sync
    connect_timeout: Annotated[float, Field(gt=0)] = 20.0

    @model_validator(mode="after")
    def _usable(self) -> MatrixOptions:
        if not self.enabled:
            return self
        if not self.homeserver.startswith(("https://", "http://")):
            raise ValueError(
                "channels.matrix.homeserver must be the client-server API base URL, such as "
                "https://matrix.example.org"
            )
        if not _USER_ID.match(self.user_id):
            raise ValueError(
                "channels.matrix.user_id must be the bot's full Matrix id, such as "
                "@perch:example.org"
            )
        if bool(self.access_token) == bool(self.password):
            raise ValueError(
                "channels.matrix.access_token or channels.matrix.password: give exactly one "
                "(MATRIX_ACCESS_TOKEN, the bot device's token, or MATRIX_PASSWORD)"
            )
        for user in self.allow_from:
            if user != "*" and not _USER_ID.match(user):
                raise ValueError(
                    f"channels.matrix.allow_from: {user!r} is not a Matrix user id (@name:server)"
                )
        for room in self.groups:
            if room != "*" and not _ROOM_ID.match(room):
                raise ValueError(
                    f"channels.matrix.groups: {room!r} is not a room id (!id or !id:server; Element: "
                    "Room settings > Advanced)"
                )
        return self

    @property
    def api_base(self) -> str:
        return self.homeserver.rstrip("/")
