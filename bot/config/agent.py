"""The `agent:` section of config.yaml, and the value types every section shares.

`parse_duration` reads `45s`, `10m`, `2h`, `1d`, `250ms` or `0` (a bare number needs a unit);
`StrictModel` refuses unknown keys, so a typo is an error naming the key. `bot.config` composes
these into the whole `Config`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from bot.config.approvals import (
    ToolVerdict,
    check_patterns,
    default_exec_allow,
    default_exec_ask,
    default_tool_policy,
)
from bot.config.embeddings import EmbeddingsConfig
from bot.config.voice import VoiceConfig

DEFAULT_MODEL = "claude-sonnet-5-5"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}


def parse_duration(value: object) -> float:
    """Seconds from `30m`, `45s`, `2h`, `1d`, `250ms`, or `0` (a bare number needs a unit)."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 45s, 10m or 2h")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        if value == 0:
            return 0.0
        raise ValueError(_needs_unit(value))
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            if match.group(2) is None and float(match.group(1)) != 0:
                raise ValueError(_needs_unit(match.group(1)))
            return float(match.group(1)) * _UNITS[match.group(2)]
    raise ValueError(f"expected a duration such as 45s, 10m or 2h, got {value!r}")


def _needs_unit(number: object) -> str:
    return f"a duration needs a unit: write {number}s, {number}m or {number}h (0 means off)"


Duration = Annotated[float, BeforeValidator(parse_duration)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QueueConfig(StrictModel):
    mode: Literal["collect", "followup", "interrupt", "steer"] = "collect"
    cap: int = Field(20, ge=1, le=1000)


class GuardConfig(StrictModel):
    mode: Literal["off", "log", "warn", "block"] = "warn"
    max_message_chars: int = Field(32768, ge=100)


class CompactionConfig(StrictModel):
    max_messages: int = Field(50, ge=8)
    context_ratio: float = Field(0.75, gt=0.1, le=0.95)
    keep_last: int = Field(4, ge=2)


class ToolPolicy(StrictModel):
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class AgentTools(ToolPolicy):
    """`agent.tools`: which tools exist, and (`policy`) which run without asking:
    {tool name or glob: allow | ask | deny, default: ...} (agents/approval.py)."""

    policy: dict[str, ToolVerdict] = Field(default_factory=default_tool_policy)


class ApprovalsConfig(StrictModel):
    """`agent.approvals`: who is asked (the owner, or whoever started the turn), how long an
    answer may take (no answer is a denial), and whether "always for this command in this
    chat" is offered and remembered (bot/approvals/)."""

    approver: Literal["owner", "requester"] = "owner"
    timeout: Duration = 300.0
    remember: bool = True

    @field_validator("timeout")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be above 0 (no answer in time is a denial)")
        return value


class SubagentConfig(StrictModel):
    max_children_per_run: int = Field(5, ge=1, le=50)
    max_concurrent: int = Field(8, ge=1, le=64)
    timeout_s: float = Field(300, gt=0)
    tools: ToolPolicy = Field(default_factory=ToolPolicy)
    model: str | None = None  # None: sub-agents use their parent chat's model


class ExecConfig(StrictModel):
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
    # Command patterns asked about / always allowed (agents/tools/command_words.py).
    ask: list[str] = Field(default_factory=default_exec_ask)
    allow: list[str] = Field(default_factory=default_exec_allow)

    @field_validator("ask", "allow")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return check_patterns(value)

    tmp_mb: int = Field(256, ge=0)  # the sandbox's /tmp: a tmpfs of this size (0: unsized)

    @model_validator(mode="after")
    def _timeout_within_max(self) -> ExecConfig:
        if self.timeout_s > self.max_timeout_s:
            raise ValueError(
                f"timeout_s ({self.timeout_s:g}) is above max_timeout_s ({self.max_timeout_s:g}); "
                "lower timeout_s or raise max_timeout_s"
            )
        return self


class WebFetchConfig(StrictModel):
    enabled: bool = True
    allow_hosts: list[str] = Field(default_factory=list)
    max_bytes: int = Field(2_000_000, ge=1000)
    timeout_s: float = Field(20, gt=0)


class BrowserConfig(StrictModel):
    """`agent.browser`: the `browser` tool (agents/tools/browser.py), off by default.

    `executable` is the Chromium to drive (None: the system's `chromium` on PATH, else
    Playwright's own build); `allow_private` lists hosts, `host:port` pairs and CIDR ranges
    the pages may reach although they are not public; `max_pages` bounds the tabs of one
    session, `timeout` one action, `idle_close` how long an unused session keeps its context
    (the browser closes when none is left); `max_bytes` bounds one response or download.
    """

    enabled: bool = False
    executable: str | None = None
    headless: bool = True
    allow_private: list[str] = Field(default_factory=list)
    max_pages: int = Field(5, ge=1, le=50)
    timeout: Duration = 30.0
    idle_close: Duration = 300.0
    max_bytes: int = Field(20_000_000, ge=10_000)

    @field_validator("timeout", "idle_close")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise ValueError("must be a positive duration such as 30s or 5m")
        return value


class WebSearchConfig(StrictModel):
    """`agent.web_search`: off until `provider` is set (agents/tools/web_search.py)."""

    provider: Literal["brave", "searxng", "tavily"] | None = None
    api_key: str = ""  # brave and tavily need one; searxng none
    base_url: str = ""  # empty: the provider's public API (searxng: required)
    max_results: int = Field(5, ge=1, le=20)  # per search, and the most `count` may ask
    cache_s: float = Field(600, ge=0)  # a repeated query is answered from memory this long
    timeout_s: float = Field(15, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"must be an http:// or https:// address, got {value!r}")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _searxng_needs_its_address(self) -> WebSearchConfig:
        if self.provider == "searxng" and not self.base_url:
            raise ValueError(
                "base_url: searxng needs the address of your instance "
                "(e.g. http://127.0.0.1:8888, with json in its search.formats)"
            )
        return self


class CacheConfig(StrictModel):
    """`agent.cache`: the prompt cache's life (agents/cache_policy.py): `5m`, `1h` (writes
    cost 2x input instead of 1.25x) or `auto`, chosen per session from its pace."""

    ttl: Literal["5m", "1h", "auto"] = "auto"


RecallSource = Literal["memory", "sessions", "skills"]


def _all_sources() -> list[RecallSource]:
    return ["memory", "sessions", "skills"]


class RecallConfig(StrictModel):
    """`agent.recall`: before each chat turn, what the search index holds about the new
    message, put in front of the model (bot/recall/turn_recall.py)."""

    enabled: bool = True
    max_snippets: int = Field(5, ge=1, le=20)
    max_tokens: int = Field(600, ge=50, le=8000)  # the whole block, 4 characters a token
    sources: list[RecallSource] = Field(default_factory=_all_sources)
    min_score: float = Field(0.5, ge=0.0, le=1.0)  # 1.0: a note about all the message asks
    embeddings: EmbeddingsConfig | None = None  # hybrid ranking of notes and skills (off)


class BudgetConfig(BaseModel):
    """`agent.budget` in config.yaml."""

    model_config = ConfigDict(extra="forbid")

    daily_usd: float = Field(0.0, ge=0)
    warn_ratio: float = Field(0.8, gt=0, lt=1)


class AgentConfig(StrictModel):
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
    image_turns: int = Field(3, ge=1)  # a user's image is sent with this many turns, then a note
    context_window: int | None = Field(None, ge=8000)
    preload_model: bool = True  # load the model SDK in the background after READY
    queue: QueueConfig = Field(default_factory=QueueConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    tools: AgentTools = Field(default_factory=AgentTools)
    subagents: SubagentConfig = Field(default_factory=SubagentConfig)
    exec: ExecConfig = Field(default_factory=ExecConfig)
    web_fetch: WebFetchConfig = Field(default_factory=WebFetchConfig)
    web_search: WebSearchConfig = Field(default_factory=WebSearchConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    voice: VoiceConfig = Field(default_factory=VoiceConfig)  # spoken replies

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        check_timezone(value)
        return value


def check_timezone(value: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown timezone {value!r} (use an IANA name like Europe/Berlin)"
        ) from exc
