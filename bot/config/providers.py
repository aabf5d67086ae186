"""The `providers:` config section: the model providers by name.

`providers.<name>: {kind: anthropic|openai, api_key, base_url, timeout_s, models: [...],
prices: {model: {input, output}}}`; `kind` defaults to `anthropic`, so today's
`providers.anthropic` block keeps working. What the whole config makes of them (model names,
fallbacks, the router) is `bot/config/models.py`'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_validator

from agents.pricing import Price
from agents.providers.model_names import DEFAULT_PROVIDER

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
