"""Perch's configuration: `config.yaml` with `${VAR}` / `${VAR:-default}` interpolation.

Secrets can also come from files: `${file:/path}` and `${cred:name}` (systemd credentials),
see bot/secret_refs.py.

`load_config(path)` reads the file, interpolates environment variables, and validates it with
the pydantic models below. Every failure becomes one `ConfigError` whose message names the
file, the key path and the problem; the CLI prints it and exits with `EXIT_CONFIG` (78, which
the systemd unit lists in `RestartPreventExitStatus`). Durations accept `45s`, `10m`, `2h`,
`1d`, plain seconds, or `0`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bot.config_shape import MAX_NESTING, deeper_than, too_deep
from bot.mcp_config import McpConfig
from bot.media_config import MediaConfig
from bot.model_config import ProvidersConfig, missing_key
from bot.secret_refs import expand_secret_refs
from channels.options import ChannelPolicy as ChannelPolicy  # re-exported: the access rules
from channels.registry import ChannelsConfig, default_channels, validate_channels

EXIT_CONFIG = 78
DEFAULT_MODEL = "claude-sonnet-5-5"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_HHMM = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class ConfigError(Exception):
    """A configuration problem, phrased for the person who edits config.yaml."""


def parse_duration(value: object) -> float:
    """Seconds from `30m`, `45s`, `2h`, `1d`, `250ms`, a number, or `0`."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 45s, 10m or 2h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            return float(match.group(1)) * _UNITS[match.group(2)]
    raise ValueError(f"expected a duration such as 45s, 10m or 2h, got {value!r}")


Duration = Annotated[float, BeforeValidator(parse_duration)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueueConfig(_Model):
    mode: Literal["collect", "followup", "interrupt", "steer"] = "collect"
    cap: int = Field(20, ge=1, le=1000)


class GuardConfig(_Model):
    mode: Literal["off", "log", "warn", "block"] = "warn"
    max_message_chars: int = Field(32768, ge=100)


class CompactionConfig(_Model):
    max_messages: int = Field(50, ge=8)
    context_ratio: float = Field(0.75, gt=0.1, le=0.95)
    keep_last: int = Field(4, ge=2)


class ToolPolicy(_Model):
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class SubagentConfig(_Model):
    max_children_per_run: int = Field(5, ge=1, le=50)
    max_concurrent: int = Field(8, ge=1, le=64)
    timeout_s: float = Field(300, gt=0)
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    model: str | None = None  # None: sub-agents use their parent chat's model


class ExecConfig(_Model):
    enabled: bool = False
    timeout_s: float = Field(60, gt=0)
    max_timeout_s: float = Field(600, gt=0)
    max_output_chars: int = Field(20000, ge=100)
    allow_env: list[str] = Field(default_factory=list)
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = False
    cpu_s: int = Field(60, ge=0)
    memory_mb: int = Field(2048, ge=0)
    max_processes: int = Field(1024, ge=0)
    max_file_mb: int = Field(1024, ge=0)

    @model_validator(mode="after")
    def _timeout_within_max(self) -> ExecConfig:
        if self.timeout_s > self.max_timeout_s:
            raise ValueError(
                f"timeout_s ({self.timeout_s:g}) is above max_timeout_s ({self.max_timeout_s:g}); "
                "lower timeout_s or raise max_timeout_s"
            )
        return self


class WebFetchConfig(_Model):
    enabled: bool = True
    allow_hosts: list[str] = Field(default_factory=list)
    max_bytes: int = Field(2_000_000, ge=1000)
    timeout_s: float = Field(20, gt=0)


class AgentConfig(_Model):
    id: str = Field("main", pattern=r"^[A-Za-z0-9_.-]+$")
    model: str = DEFAULT_MODEL
    fallback_models: list[str] = Field(default_factory=list)  # older name of `fallbacks`
    fallbacks: list[str] = Field(default_factory=list)  # "<provider>/<model>", in order
    workspace: Path = Path("./workspace")
    timezone: str = "UTC"
    max_iterations: int = Field(20, ge=1, le=200)
    max_tokens: int = Field(8192, ge=256)
    max_concurrent_runs: int = Field(8, ge=1, le=256)
    group_max_concurrent: int = Field(3, ge=1, le=32)
    max_spawn_depth: int = Field(1, ge=1, le=5)
    max_tool_result_chars: int = Field(50_000, ge=1000)
    history_turns: int = Field(50, ge=1)
    context_window: int | None = Field(None, ge=8000)
    preload_model: bool = True  # load the model SDK in the background after READY
    queue: QueueConfig = Field(default_factory=QueueConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    subagents: SubagentConfig = Field(default_factory=SubagentConfig)
    exec: ExecConfig = Field(default_factory=ExecConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        _check_timezone(value)
        return value


def _check_timezone(value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown timezone {value!r} (use an IANA name like Europe/Berlin)"
        ) from exc


class StoreConfig(_Model):
    path: Path = Path("./data/perch.db")
    url: str = ""  # postgresql://user:pass@host/db selects PostgreSQL instead of `path`

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


class GatewayConfig(_Model):
    recovery_window: Duration = 900.0
    group_context_messages: int = Field(50, ge=0, le=500)
    shutdown_grace: Duration = 20.0


class HeartbeatTarget(_Model):
    channel: str
    to: str


class HeartbeatConfig(_Model):
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
            _check_timezone(value)
        return value


class LoggingConfig(_Model):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class Config(_Model):
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


def interpolate(value: Any, env: dict[str, str], path: str = "") -> Any:
    """Replace `${VAR}` and `${VAR:-default}` in every string of a parsed YAML tree."""
    if isinstance(value, dict):
        return {k: interpolate(v, env, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env, f"{path}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        hint = (
            "export ANTHROPIC_API_KEY=sk-ant-... (or put it in the EnvironmentFile of the "
            "systemd unit)"
            if name == "ANTHROPIC_API_KEY"
            else f"export {name}=..., or write ${{{name}:-default}} in the file"
        )
        raise ConfigError(f"{path}: environment variable {name} is not set; {hint}")

    return expand_secret_refs(_ENV_REF.sub(substitute, value), env, path)


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


def load_config(path: Path | str, env: dict[str, str] | None = None) -> Config:
    """Read, interpolate and validate a config file, or raise one readable `ConfigError`."""
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
    try:
        data = interpolate(raw, env)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors()]
        raise ConfigError(f"{path}: " + "; ".join(problems)) from None
    config.source = path.resolve()
    return config


def require_api_key(config: Config) -> None:
    """Refuse to start without a model API key, saying how to set one."""
    if (problem := missing_key(config)) is not None:
        raise ConfigError(problem)
