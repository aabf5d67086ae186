"""The hub's config sections: `agents:`, `bindings:`, `hooks:` and `api:`.

- `agents:` lists further agents beside `agent:` (which stays agent `main`, so every older
  config works unchanged). Each has an `id` and may set any key `agent:` has; a key it leaves
  out is `agent:`'s (the whole key: `tools:` set on an agent replaces `agent.tools`), except
  `workspace`, which is never shared: it defaults to `./workspace-<id>` beside the config,
  and two agents naming the same folder is an error. `merge_agents` does this on the raw
  mapping, before validation, so errors name `agents.<n>.<key>`.
- `bindings:` routes chats to agents, first match wins, unmatched traffic goes to `main`:
  `{agent, channel, account, chat, peer}` (`chat` a group's id, `peer` a person's id: their
  DMs). `bot/hub/bindings.py` matches them (pure).
- `hooks:` `{enabled, endpoints: {<name>: {secret, signature: github|perch, agent, session,
  message, deliver, max_chars, per_minute}}}`: signed webhooks in (`bot/hub/hooks.py`).
- `api:` `{enabled, tokens}`: the OpenAI-compatible API (`bot/hub/openai_api.py`).
Both are served on `web.listen`, by the dashboard's server, which runs for them alone when
the dashboard is off. Secrets (hook secrets, API tokens) are at least 16 characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import Field, field_validator, model_validator

from bot.config.agent import StrictModel

MIN_SECRET_CHARS = 16
HOOK_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ID_PATTERN = r"^[A-Za-z0-9_.-]+$"


def merge_agents(data: object) -> object:
    """The raw `agents:` entries filled in from the raw `agent:` (see the module's words).
    Anything not shaped as expected is left for validation to name."""
    if not isinstance(data, dict):
        return data
    entries = data.get("agents")
    if not isinstance(entries, list):
        return data
    main = data.get("agent")
    base = {k: v for k, v in (main if isinstance(main, dict) else {}).items() if k != "id"}
    base.pop("workspace", None)
    merged: list[object] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            filled = {**base, **entry}
            filled.setdefault("workspace", f"./workspace-{entry['id']}")
            merged.append(filled)
        else:
            merged.append(entry)
    return {**data, "agents": merged}


class BindingConfig(StrictModel):
    """One rule of `bindings:`: the fields it sets must all match (`chat` only in groups,
    rooms and channels; `peer` only in DMs); it must set at least one."""

    agent: str = Field(pattern=ID_PATTERN)
    channel: str | None = None
    account: str | None = None
    chat: str | None = None  # a group / room / channel id
    peer: str | None = None  # a person's id: their DMs

    @field_validator("channel", "account", "chat", "peer", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _some_field(self) -> BindingConfig:
        if not any((self.channel, self.account, self.chat, self.peer)):
            raise ValueError(
                "a binding needs at least one of channel, account, chat, peer "
                "(unmatched traffic goes to main anyway)"
            )
        if self.chat and self.peer:
            raise ValueError("a binding matches a group (chat) or a DM (peer), not both")
        return self


class HookEndpoint(StrictModel):
    """`hooks.endpoints.<name>`: what `POST /hooks/<name>` checks and runs."""

    secret: str
    signature: Literal["github", "perch"] = "perch"
    agent: str = Field("main", pattern=ID_PATTERN)
    session: str = "isolated"  # a fresh session per call; any other word names a session
    message: str = "Webhook {name}:\n{body}"  # {body}, {json.a.b}, {headers.X-Name}, {name}
    deliver: str = "none"  # "<channel>:<chat>" posts the reply there; none keeps it
    max_chars: int = Field(8000, ge=100, le=100_000)  # the message is cut to this
    per_minute: int = Field(30, ge=1, le=10_000)  # accepted calls per minute, then 429

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: str) -> str:
        if len(value.strip()) < MIN_SECRET_CHARS:
            raise ValueError(
                f"must be at least {MIN_SECRET_CHARS} characters "
                "(e.g. the output of openssl rand -hex 24)"
            )
        return value.strip()

    @field_validator("session")
    @classmethod
    def _session(cls, value: str) -> str:
        if not HOOK_NAME.match(value):
            raise ValueError("must be isolated or a session name of letters, digits, - and _")
        return value


class HooksConfig(StrictModel):
    enabled: bool = False
    endpoints: dict[str, HookEndpoint] = Field(default_factory=dict)
    max_body: int = Field(1_000_000, ge=1024, le=50_000_000)  # bytes; larger: 413

    @field_validator("endpoints")
    @classmethod
    def _names(cls, value: dict[str, HookEndpoint]) -> dict[str, HookEndpoint]:
        for name in value:
            if not HOOK_NAME.match(name):
                raise ValueError(f"endpoint name {name!r} must be letters, digits, - and _")
        return value


class ApiConfig(StrictModel):
    enabled: bool = False
    tokens: list[str] = Field(default_factory=list)  # Authorization: Bearer <token>
    max_body: int = Field(4_000_000, ge=1024, le=100_000_000)  # bytes; larger: 413

    @field_validator("tokens")
    @classmethod
    def _tokens(cls, value: list[str]) -> list[str]:
        short = [i for i, token in enumerate(value) if len(token.strip()) < MIN_SECRET_CHARS]
        if short:
            raise ValueError(
                f"token {short[0]} is shorter than {MIN_SECRET_CHARS} characters "
                "(make one with openssl rand -hex 24)"
            )
        return [token.strip() for token in value]

    @model_validator(mode="after")
    def _needs_tokens(self) -> ApiConfig:
        if self.enabled and not self.tokens:
            raise ValueError("api.enabled needs at least one token in api.tokens")
        return self


def check_hub(
    main_id: str,
    agent_ids: Iterable[str],
    bindings: Iterable[BindingConfig],
    endpoints: Mapping[str, HookEndpoint],
) -> None:
    """Raise ValueError naming the key when a binding or an endpoint names no agent, or an
    id is used twice."""
    ids = [main_id, *agent_ids]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"agents: the id {twice[0]!r} is used twice (agent: is {main_id!r})")
    known = ", ".join(ids)
    for n, binding in enumerate(bindings):
        if binding.agent not in ids:
            raise ValueError(f"bindings.{n}.agent: no agent {binding.agent!r} (agents: {known})")
    for name, endpoint in endpoints.items():
        if endpoint.agent not in ids:
            raise ValueError(
                f"hooks.endpoints.{name}.agent: no agent {endpoint.agent!r} (agents: {known})"
            )


def hub_secrets(hooks: HooksConfig, api: ApiConfig) -> list[str]:
    """The hooks' secrets and the API's tokens (never logged)."""
    return [*(e.secret for e in hooks.endpoints.values()), *api.tokens]
