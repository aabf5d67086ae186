"""The validated shape of `config.yaml`: the `Config` root model and its smaller sections.

Each larger section has a module of its own beside this one (`agent.py`, `providers.py`,
`mcp.py`, `media.py`; channels come from their plug-ins through `channels.registry`).
`load.py` reads the file into a `Config`. Durations need a unit (`45s`, `10m`, `2h`, `1d`,
`250ms`); a bare `0` (off) is the only number accepted, so `every: 30` is an error rather
than a silent 30 seconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from bot.config.agent import AgentConfig, Duration, StrictModel, check_timezone
from bot.config.mcp import McpConfig
from bot.config.media import MediaConfig
from bot.config.providers import ProvidersConfig
from channels.registry import ChannelsConfig, default_channels, validate_channels

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


class LoggingConfig(StrictModel):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"
    file: Path | None = None  # also log here (the console keeps stderr to warnings)


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

    # Where the file was read from; relative paths in it are resolved against its folder.
    source: Path | None = Field(None, exclude=True)
    # What a lenient load left unresolved: one sentence per key (see `load_config`).
    unresolved: list[str] = Field(default_factory=list, exclude=True)
    # Every `${file:}`/`${cred:}` path the file names, the secret values it holds (for the
    # log redactor), and `$CREDENTIALS_DIRECTORY` when set: masked in every sandbox.
    secret_files: list[Path] = Field(default_factory=list, exclude=True)
    secret_values: list[str] = Field(default_factory=list, exclude=True)
    credentials_dir: Path | None = Field(None, exclude=True)

    @field_validator("channels", mode="wrap")
    @classmethod
    def _by_plugin(cls, value: object, handler: Any) -> ChannelsConfig:
        return validate_channels(value)  # each channels.<key> by its plug-in's options model

    def resolve(self, path: Path) -> Path:
        """A path from the config made absolute against the config file's folder."""
        if path.is_absolute() or self.source is None:
            return path.expanduser()
        return (self.source.parent / path).resolve()

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
