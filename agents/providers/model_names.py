"""Model names `<provider>/<model>`: the one parser the router, the config and `/model` share.

A name whose part before the first "/" is a configured provider, with a model after it, names
that provider's model; any other name is, whole, a model of the default provider
(`anthropic`). So `claude-sonnet-5-5` is `anthropic/claude-sonnet-5-5`,
`openrouter/anthropic/claude-x` is OpenRouter's model `anthropic/claude-x` when `openrouter`
is configured, and `qwen/qwen3` with no `qwen` provider, `local/` and `/x` are models of the
default provider as written. Whether such a name is welcome is the caller's rule: `/model`
refuses a "/" that names no provider, the config and the router take it as a model id.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

__all__ = ["DEFAULT_PROVIDER", "ModelName", "parse_model_name"]

DEFAULT_PROVIDER = "anthropic"


@dataclass(frozen=True, slots=True)
class ModelName:
    """A model name read against the configured providers.

    `prefix` is what stands before the first "/" (None without one); `explicit` says the
    name named its provider (the prefix is a configured provider and a model follows).
    """

    provider: str
    model: str
    prefix: str | None
    explicit: bool

    @property
    def qualified(self) -> str:
        """`<provider>/<model>`, the provider always written."""
        return f"{self.provider}/{self.model}"

    def shown(self, default: str = DEFAULT_PROVIDER) -> str:
        """The name as a user writes it: bare for the default provider."""
        return self.model if self.provider == default else self.qualified


def parse_model_name(
    name: str, providers: Container[str], default: str = DEFAULT_PROVIDER
) -> ModelName:
    """`name` read against the configured `providers` (see the module docstring)."""
    head, slash, rest = name.partition("/")
    if slash and rest and head in providers:
        return ModelName(head, rest, head, explicit=True)
    return ModelName(default, name, head if slash else None, explicit=False)
