"""The options every channel plug-in's config model shares (`channels.<key>` in config.yaml).

`ChannelOptions` is the base of every plug-in's pydantic model: unknown keys are refused and
`enabled` switches the channel on. `ChannelPolicy` adds the access rules chat platforms share
(DESIGN section 3, step 2). Fields typed `Secret` are credentials: `secret_values(options)`
lists them so the daemon can keep them out of its logs without knowing any platform.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator


class _SecretMarker:
    """Metadata on a field that holds a credential (see `Secret`)."""


SECRET = _SecretMarker()
Secret = Annotated[str, Field(repr=False), SECRET]


def _ids(value: object) -> object:
    """Allow-lists may hold numbers in YAML (Telegram ids); keep them as strings."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return value


IdList = Annotated[list[str], BeforeValidator(_ids)]
OneId = Annotated[str | None, BeforeValidator(lambda v: v if v is None else str(v))]


class ChannelOptions(BaseModel):
    """Base of a plug-in's options: validated when the config loads, handed to the adapter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False

    def owner_ids(self) -> tuple[str, ...]:
        """The owner's id on this channel (at most one; none by default)."""
        return ()


def secret_values(options: BaseModel) -> list[str]:
    """The values of every `Secret` field of `options`, nested sections' too (empty ones left
    out)."""
    found: list[str] = []
    for name, info in type(options).model_fields.items():
        value = getattr(options, name)
        if SECRET in info.metadata:
            if isinstance(value, str) and value:
                found.append(value)
        elif isinstance(value, BaseModel):
            found.extend(secret_values(value))
    return found


def is_secret_field(model: type[BaseModel], dotted: str) -> bool:
    """Whether the field at `dotted` (`token`, `imap.password`) of `model` is a `Secret`."""
    head, _, rest = dotted.partition(".")
    info = model.model_fields.get(head)
    if info is None:
        return False
    if not rest:
        return SECRET in info.metadata
    inner = info.annotation
    return isinstance(inner, type) and issubclass(inner, BaseModel) and is_secret_field(inner, rest)


class ChannelPolicy(ChannelOptions):
    """Access rules shared by every chat platform (DESIGN section 3, step 2).

    A channel whose options are a `ChannelPolicy` takes DMs from strangers through pairing;
    its owner is `owner` when set, else the first id in `allow_from` that is not `"*"`. The
    owner is ONE person: every other allowed or paired id is someone else (bot/kernel/people.py).
    """

    owner: OneId = None  # the owner's id here; default: the first real allow_from id

    dm_policy: Literal["pairing", "allowlist", "open", "disabled"] = "pairing"
    allow_from: IdList = Field(default_factory=list)
    group_policy: Literal["allowlist", "open", "disabled"] = "allowlist"
    groups: IdList = Field(default_factory=list)
    require_mention: bool = True
    mention_patterns: list[str] = Field(default_factory=list)
    streaming: Literal["off", "partial"] = "partial"
    max_image_bytes: int = Field(5_000_000, ge=1_000)
    max_file_bytes: int = Field(20_000_000, ge=1_000)  # voice notes and documents received
    ack_reaction: str = ""  # e.g. "👀": put on a message when it arrives, off once answered

    def owner_ids(self) -> tuple[str, ...]:
        """The one owner id (explicit `owner`, else the first real `allow_from` id), or none."""
        if self.owner:
            return (self.owner,)
        return next(((i,) for i in self.allow_from if i != "*"), ())

    def allows(self, sender_id: str) -> bool:
        """Whether `allow_from` names this sender (a platform may widen the match, as email's
        `@domain` entries do); `"*"` is the `open` policy's, not a match here."""
        return sender_id in self.allow_from

    @model_validator(mode="after")
    def _policies_make_sense(self) -> ChannelPolicy:
        if self.owner is not None and (not self.owner.strip() or self.owner == "*"):
            raise ValueError('owner must be one user id (not empty, not "*")')
        if not self.enabled:
            return self
        if self.dm_policy == "allowlist" and not self.allow_from:
            raise ValueError(
                "dm_policy is allowlist but allow_from is empty, so nobody could write to the "
                "bot; list the allowed sender ids, or use dm_policy: pairing"
            )
        if self.dm_policy == "open" and "*" not in self.allow_from:
            raise ValueError(
                'dm_policy open lets anyone talk to the bot; confirm it with allow_from: ["*"]'
            )
        if self.group_policy == "open" and self.groups and "*" not in self.groups:
            raise ValueError(
                'group_policy open ignores the groups list; use groups: ["*"] or group_policy: '
                "allowlist"
            )
        for pattern in self.mention_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"mention_patterns: {pattern!r} is not a regex: {exc}") from exc
        return self
