"""The `providers:` config section and what the daemon builds from it.

`providers.<name>: {kind: anthropic|openai, api_key, base_url, timeout_s, models: [...],
prices: {model: {input, output}}}`; `kind` defaults to `anthropic`, so today's
`providers.anthropic` block keeps working. Model names are `<provider>/<model>`, a bare name
meaning the `anthropic` provider (`agents.providers.model_names`). `build_router` makes the one
`ModelClient` of the daemon; `offered_models` is what `/model` lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from agents.observer import NO_OBSERVER, RunObserver
from agents.pricing import Price
from agents.providers.model_names import DEFAULT_PROVIDER, parse_model_name
from agents.providers.router import ModelRouter

if TYPE_CHECKING:
    from bot.config.schema import Config

_BASE_URLS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}


class PriceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: float = Field(ge=0)  # USD per million input tokens
    output: float = Field(ge=0)  # USD per million output tokens


class ProviderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["anthropic", "openai"] = "anthropic"
    api_key: str = ""
    base_url: str = ""
    timeout_s: float = Field(600, gt=0)
    models: list[str] = Field(default_factory=list)
    prices: dict[str, PriceConfig] = Field(default_factory=dict)
    max_attempts: int = Field(8, ge=1, le=50)
    unreachable_budget_s: float = Field(30, ge=0)

    @model_validator(mode="after")
    def _default_base_url(self) -> ProviderConfig:
        if not self.base_url:
            self.base_url = _BASE_URLS[self.kind]
        return self

    def price_table(self) -> dict[str, Price]:
        return {m: Price(p.input, p.output) for m, p in self.prices.items()}


class ProvidersConfig(RootModel[dict[str, ProviderConfig]]):
    """Named providers; `anthropic` is always there (empty key unless configured)."""

    root: dict[str, ProviderConfig] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _names(self) -> ProvidersConfig:
        for name in self.root:
            if not name or "/" in name or not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(
                    f"provider name {name!r} must be letters, digits, '-' or '_' (no '/')"
                )
        self.root.setdefault(DEFAULT_PROVIDER, ProviderConfig())
        return self

    @property
    def anthropic(self) -> ProviderConfig:
        return self.root[DEFAULT_PROVIDER]

    def items(self) -> list[tuple[str, ProviderConfig]]:
        return list(self.root.items())

    def get(self, name: str) -> ProviderConfig | None:
        return self.root.get(name)


# The `anthropic` provider a config gets when it does not write one (or writes it without a
# key): from the environment, as the shipped config.yaml writes it.
IMPLIED_ANTHROPIC = {
    "api_key": "${ANTHROPIC_API_KEY:-}",
    "base_url": "${ANTHROPIC_BASE_URL:-https://api.anthropic.com}",
}


def with_implied_provider(raw: dict[str, object]) -> dict[str, object]:
    """The raw config (before interpolation) with `providers.anthropic`'s key and address
    taken from ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL where the file gives none, so a config
    without a `providers:` block works with the key in the environment. Anything that is not
    a mapping is left for validation to report."""
    providers = raw.get("providers")
    if providers is None:
        providers = {}
    if not isinstance(providers, dict):
        return raw
    section = providers.get(DEFAULT_PROVIDER)
    if section is None:
        section = {}
    if not isinstance(section, dict) or section.get("kind", "anthropic") != "anthropic":
        return raw
    implied = {k: v for k, v in IMPLIED_ANTHROPIC.items() if k not in section}
    if not implied:
        return raw
    return {**raw, "providers": {**providers, DEFAULT_PROVIDER: {**section, **implied}}}


def split_model(config: Config, name: str) -> tuple[str, str]:
    """(provider, model) of a model name under this config."""
    parsed = parse_model_name(name, config.providers.root)
    return parsed.provider, parsed.model


def display_model(config: Config, name: str) -> str:
    provider, model = split_model(config, name)
    return model if provider == DEFAULT_PROVIDER else f"{provider}/{model}"


def fallbacks(config: Config) -> list[str]:
    """`agent.fallbacks`, then the older `agent.fallback_models`, without repeats."""
    out: list[str] = []
    for name in [*config.agent.fallbacks, *config.agent.fallback_models]:
        if display_model(config, name) not in out:
            out.append(display_model(config, name))
    return out


def used_providers(config: Config) -> list[str]:
    """Providers that agent.model and the fallbacks name, in that order."""
    names: list[str] = []
    for model in [config.agent.model, *fallbacks(config)]:
        provider = split_model(config, model)[0]
        if provider not in names:
            names.append(provider)
    return names


def offered_models(config: Config) -> list[str]:
    """What `/model` lists: the configured model, the fallbacks, each provider's `models`."""
    out: list[str] = []
    for name in [config.agent.model, *fallbacks(config)]:
        if (shown := display_model(config, name)) not in out:
            out.append(shown)
    for provider, settings in config.providers.items():
        for model in settings.models:
            shown = display_model(config, f"{provider}/{model}")
            if shown not in out:
                out.append(shown)
    return out


def missing_key(config: Config) -> str | None:
    """A one-line complaint when a used provider has no key and needs one, else None."""
    for name in used_providers(config):
        settings = config.providers.get(name)
        if settings is None or settings.kind != "anthropic" or settings.api_key.strip():
            continue
        if name == DEFAULT_PROVIDER:
            return (
                "providers.anthropic.api_key is empty: set ANTHROPIC_API_KEY (export "
                "ANTHROPIC_API_KEY=sk-ant-..., or the EnvironmentFile of the systemd unit)"
            )
        return f"providers.{name}.api_key is empty: set it in config.yaml (e.g. ${{MY_KEY}})"
    return None


def build_router(config: Config, observer: RunObserver = NO_OBSERVER) -> ModelRouter:
    """The daemon's model client: every configured provider, the configured fallbacks;
    each model call is reported to `observer` (metrics, traces)."""
    from agents.providers import make_provider

    clients = {
        name: make_provider(
            settings.kind,
            name=name,
            api_key=settings.api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            prices=settings.price_table(),
            max_attempts=settings.max_attempts,
            unreachable_budget_s=settings.unreachable_budget_s,
        )
        for name, settings in config.providers.items()
    }
    return ModelRouter(
        clients, default_provider=DEFAULT_PROVIDER, fallbacks=fallbacks(config), observer=observer
    )
