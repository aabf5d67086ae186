"""The validated shape of `config.yaml`: the `Config` root model and its smaller sections.

Each larger section has a module of its own beside this one (`agent.py`, `providers.py`,
`mcp.py`, `media.py`, `observe.py` for `metrics:` and `tracing:`, `web.py` for the dashboard; channels come from their plug-ins through `channels.registry`).
`load.py` reads the file into a `Config`. Durations need a unit (`45s`, `10m`, `2h`, `1d`,
`250ms`); a bare `0` (off) is the only number accepted, so `every: 30` is an error rather
than a silent 30 seconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from bot.config.agent import AgentConfig, Duration, StrictModel, check_timezone
from bot.config.hub import (
    ApiConfig,
    BindingConfig,
    HooksConfig,
    check_hub,
    hub_secrets,
    merge_agents,
)
from bot.config.mcp import McpConfig, mcp_secrets
from bot.config.media import MediaConfig
from bot.config.observe import MetricsConfig, TracingConfig, observe_secrets
from bot.config.providers import ProvidersConfig
from bot.config.redact import is_reference
from bot.config.web import WebConfig
from channels.registry import ChannelsConfig, default_channels, secrets, validate_channels

_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class StoreConfig(StrictModel):
    path: Path = Path("./data/perch.db")
    url: str = ""  # postgresql://user:pass@host/db selects PostgreSQL instead of `path`
    lease: Duration = 30.0  # a dead instance's messages and claims pass on after this

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if value and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must start with postgresql:// (or be empty to use store.path)")
        try:
            _ = urlsplit(value).port  # a bad host or port fails here
        except ValueError as exc:
            raise ValueError(f"is not a valid postgresql:// URL ({exc})") from None
        return value


class GatewayConfig(StrictModel):
    recovery_window: Duration = 900.0
    group_context_messages: int = Field(50, ge=0, le=500)
    shutdown_grace: Duration = 20.0
    # The daemon's event loop: uvloop took ~0.35 ms of CPU off a turn (bench/README.md).
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"
    # A reply done within this is sent once, with no streamed preview: a preview costs a
    # message and an edit, twice the platform's calls for a reply the user waited ~1 s for.
    preview_after: Duration = 1.0
    # "typing…" shows once a reply has taken this: a reply done sooner needs none, and the
    # indicator costs a platform call (and ~0.5 ms of CPU) every turn.
    typing_after: Duration = 0.5


class HeartbeatTarget(StrictModel):
    channel: str
    to: str


class HeartbeatConfig(StrictModel):
    every: Duration = 1800.0
    active_hours: str | None = None
    timezone: str | None = None
    target: Literal["owner", "last", "none"] | HeartbeatTarget = "owner"

    @field_validator("target", mode="before")
    @classmethod
    def _target(cls, value: object) -> object:
        """One message in the user's terms instead of one per member of the union."""
        usage = "owner, last, none, or {channel: <channel>, to: <chat id>}"
        if value in ("owner", "last", "none") or isinstance(value, HeartbeatTarget):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"must be {usage}, got {value!r}")
        missing = [key for key in ("channel", "to") if key not in value]
        unknown = [str(key) for key in value if key not in ("channel", "to")]
        if missing or unknown:
            problem = f"lacks {' and '.join(missing)}" if missing else f"has {', '.join(unknown)}"
            raise ValueError(f"the target mapping {problem}; write {usage}")
        return {key: str(item) for key, item in value.items()}

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = value.split("-")
        if len(parts) != 2 or not all(_HHMM.match(p.strip()) for p in parts):
            raise ValueError(f"expected HH:MM-HH:MM such as 08:00-22:00, got {value!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str | None) -> str | None:
        if value is not None:
            check_timezone(value)
        return value


class SkillsConfig(StrictModel):
    """`skills`: folders of skill folders besides `<workspace>/skills` and the bundled ones,
    looked at in this order after the workspace (relative paths: from the config's folder)."""

    paths: list[Path] = Field(default_factory=list)
    # past this many usable skills the prompt lists only the `always` ones and the model
    # finds the rest with skill_search (the listing's own cap switches it too); 0: never
    search_above: int = Field(40, ge=0)


class LoggingConfig(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"
    file: Path | None = None  # also log here (the console keeps stderr to warnings)


class SecretsConfig(StrictModel):
    """Where Perch reads its secrets itself, so nothing must be sourced or exported first."""

    env_file: Path | None = None  # VAR=value lines (mode 0600) for the config's ${VAR}s
    credentials_dir: Path | None = None  # one file per secret, for ${cred:name} (mode 0700)


class Config(StrictModel):
    agent: AgentConfig = Field(default_factory=AgentConfig)
    providers: ProvidersConfig = Field(default_factory=ProvidersConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    channels: ChannelsConfig = Field(default_factory=default_channels)
    mcp: McpConfig = Field(default_factory=McpConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    agents: list[AgentConfig] = Field(default_factory=list)  # beside `agent:` (main)
    bindings: list[BindingConfig] = Field(default_factory=list)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)

    # Where the file was read from; relative paths in it are resolved against its folder.
    source: Path | None = Field(None, exclude=True)
    # What a lenient load left unresolved: one sentence per key (see `load_config`).
    unresolved: list[str] = Field(default_factory=list, exclude=True)
    # The keys those sentences are about ("providers.anthropic.api_key", ...).
    unresolved_keys: list[str] = Field(default_factory=list, exclude=True)
    # Every `${file:}`/`${cred:}` path the file names, the secret values it holds (for the
    # log redactor), and `$CREDENTIALS_DIRECTORY` when set: masked in every sandbox.
    secret_files: list[Path] = Field(default_factory=list, exclude=True)
    found_secrets: list[str] = Field(default_factory=list, exclude=True)
    credentials_dir: Path | None = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _fill_agents(cls, data: object) -> object:
        return merge_agents(data)  # `agents:` entries take what they leave out from `agent:`

    @model_validator(mode="after")
    def _hub(self) -> Config:
        check_hub(self.agent.id, (a.id for a in self.agents), self.bindings, self.hooks.endpoints)
        places = [self.resolve(a.workspace) for a in (self.agent, *self.agents)]
        shared = sorted({str(p) for p in places if places.count(p) > 1})
        if shared:
            raise ValueError(
                f"agents: two agents share the workspace {shared[0]}; give each its own"
            )
        return self

    def agent_ids(self) -> list[str]:
        """`main` (the `agent:` section's id) first, then `agents:` in order."""
        return [self.agent.id, *(a.id for a in self.agents)]

    def for_agent(self, agent_id: str) -> Config:
        """This config as agent `agent_id` sees it: its section in place of `agent:`.
        Raises KeyError for an unknown id."""
        if agent_id == self.agent.id:
            return self
        for entry in self.agents:
            if entry.id == agent_id:
                return self.model_copy(update={"agent": entry})
        raise KeyError(agent_id)

    @field_validator("channels", mode="wrap")
    @classmethod
    def _by_plugin(cls, value: object, handler: Any) -> ChannelsConfig:
        return validate_channels(value)  # each channels.<key> by its plug-in's options model

    def resolve(self, path: Path) -> Path:
        """A path from the config made absolute against the config file's folder."""
        if path.is_absolute() or self.source is None:
            return path.expanduser()
        return (self.source.parent / path).resolve()

    def is_unresolved(self, prefix: str) -> bool:
        """True when a key at or below `prefix` kept an unset `${...}` (a lenient load)."""
        return any(k == prefix or k.startswith(prefix + ".") for k in self.unresolved_keys)

    def secret_values(self) -> list[str]:
        """Every secret the config holds (keys, tokens, headers): what the log must never
        show (`bot.process.logs.Redactor`). A `${...}` a lenient load left unset is none."""
        found = [
            *(provider.api_key for _, provider in self.providers.items()),
            *secrets(self.channels),
            *mcp_secrets(self.mcp),
            *(a.web_search.api_key for a in (self.agent, *self.agents)),
            *observe_secrets(self.metrics, self.tracing),
            self.web.token or "",
            *hub_secrets(self.hooks, self.api),
            *self.found_secrets,  # whatever key holds them, and every secret file's content
        ]
        return [value for value in found if value and not is_reference(value)]

    @property
    def workspace(self) -> Path:
        return self.resolve(self.agent.workspace)

    @property
    def db_path(self) -> Path:
        return self.resolve(self.store.path)

    @property
    def store_target(self) -> Path | str:
        """Where the store is: the PostgreSQL URL if set, else the SQLite file."""
        return self.store.url or self.db_path
