"""Perch's configuration: `config.yaml` with `${VAR}` / `${VAR:-default}` interpolation.

Secrets can also come from files: `${file:/path}` and `${cred:name}` (systemd credentials),
see bot/secret_refs.py.

`load_config(path)` reads the file, interpolates environment variables, and validates it with
the pydantic models below. Every failure becomes one `ConfigError` whose message names the
file, the key path and the problem; the CLI prints it and exits with `EXIT_CONFIG` (78, which
the systemd unit lists in `RestartPreventExitStatus`). Durations need a unit (`45s`, `10m`,
`2h`, `1d`, `250ms`); a bare `0` (off) is the only number accepted, so `every: 30` is an error
rather than a silent 30 seconds. `load_config(path, lenient=True)` is for commands that never
use secrets (status, pairing, cron, ...): an unset `${VAR}` or unreadable secret file stays as
its literal text and is listed in `Config.unresolved` instead of failing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
)

from bot.config_agent import DEFAULT_MODEL as DEFAULT_MODEL  # re-exported
from bot.config_agent import AgentConfig, Duration, StrictModel, check_timezone
from bot.config_agent import parse_duration as parse_duration  # re-exported
from bot.config_lenient import relax
from bot.config_shape import MAX_NESTING, deeper_than, too_deep
from bot.mcp_config import McpConfig
from bot.media_config import MediaConfig
from bot.model_config import ProvidersConfig, missing_key
from bot.secret_refs import expand_secret_refs
from channels.options import ChannelPolicy as ChannelPolicy  # re-exported: the access rules
from channels.registry import ChannelsConfig, default_channels, validate_channels

EXIT_CONFIG = 78

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class ConfigError(Exception):
    """A configuration problem, phrased for the person who edits config.yaml."""


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


def interpolate(
    value: Any, env: dict[str, str], path: str = "", missing: list[tuple[str, str]] | None = None
) -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string of a parsed YAML tree.

    With a `missing` list, an unset variable or an unreadable `${file:}`/`${cred:}` secret is
    left as written and noted there as (key path, one sentence naming it) instead of raising."""
    if isinstance(value, dict):
        return {
            k: interpolate(v, env, f"{path}.{k}" if path else str(k), missing)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [interpolate(v, env, f"{path}[{i}]", missing) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        if missing is not None:
            missing.append((path, f"{path} uses ${{{name}}}, which is not set (export {name}=...)"))
            return match.group(0)
        hint = (
            "export ANTHROPIC_API_KEY=sk-ant-... (or put it in the EnvironmentFile of the "
            "systemd unit)"
            if name == "ANTHROPIC_API_KEY"
            else f"export {name}=..., or write ${{{name}:-default}} in the file"
        )
        raise ConfigError(f"{path}: environment variable {name} is not set; {hint}")

    text = _ENV_REF.sub(substitute, value)
    if missing is None:
        return expand_secret_refs(text, env, path)
    try:
        return expand_secret_refs(text, env, path)
    except ConfigError as exc:  # an unreadable secret file: noted, left as written
        missing.append((path, str(exc)))
        return text


def _describe(error: Mapping[str, Any]) -> str:
    where = ".".join(str(p) for p in error["loc"] if not str(p).startswith("function-"))
    message = str(error["msg"]).removeprefix("Value error, ")
    if where and message.startswith(where + "."):
        return message  # a plug-in's message already names its key
    if error["type"] == "extra_forbidden":
        message = "unknown key (check the spelling against the shipped config.yaml)"
    elif (
        "input" in error
        and error["type"] not in ("missing",)
        and not isinstance(error["input"], dict | list)
        and repr(error["input"]) not in message
        and f"({error['input']})" not in message
    ):
        message += f" (got {error['input']!r})"
    return f"{where}: {message}" if where else message


def load_config(
    path: Path | str, env: dict[str, str] | None = None, *, lenient: bool = False
) -> Config:
    """Read, interpolate and validate a config file, or raise one readable `ConfigError`.

    `lenient`: unset `${VAR}`s don't fail; they are listed in `Config.unresolved`."""
    path = Path(path)
    env = dict(os.environ) if env is None else env
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} on line {line}); "
            "save the file as UTF-8"
        ) from None
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such file; copy the shipped config.yaml there or pass --config PATH"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(too_deep(path)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections (agent:, ...)")
    if deeper_than(raw, MAX_NESTING):
        raise ConfigError(too_deep(path))
    missing: list[tuple[str, str]] | None = [] if lenient else None
    try:
        data = interpolate(raw, env, missing=missing)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    notes = [note for _, note in missing or []]
    while True:
        try:
            config = Config.model_validate(data)
            break
        except ValidationError as exc:
            errors = exc.errors()
            if not missing or not relax(data, [where for where, _ in missing], errors, notes):
                problems = [_describe(e) for e in errors]
                raise ConfigError(f"{path}: " + "; ".join(problems)) from None
    config.source = path.resolve()
    config.unresolved = notes
    return config


def require_api_key(config: Config) -> None:
    """Refuse to start without a model API key, saying how to set one."""
    if (problem := missing_key(config)) is not None:
        raise ConfigError(problem)
