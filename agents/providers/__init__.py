"""Model providers, one module per kind, behind `agents.model.ModelClient`.

`anthropic` (the Messages API) and `openai` (any Chat Completions endpoint) share one retry
policy (`retry`) and one base (`sdk_provider.SdkProvider`: settings, the SDK client's life, the
retried call); `router.ModelRouter` picks the provider by model name and falls back across
providers. SDKs are imported on first use, never by importing this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agents.model import ModelClient
from agents.pricing import Price

ProviderKind = Literal["anthropic", "openai"]
KINDS: tuple[ProviderKind, ...] = ("anthropic", "openai")


def make_provider(
    kind: str,
    *,
    name: str,
    api_key: str,
    base_url: str | None,
    timeout: float,
    prices: Mapping[str, Price] | None = None,
    **policy: Any,
) -> ModelClient:
    """A client of `kind` named `name` (its config key). `policy` tunes retries."""
    if kind == "anthropic":
        from agents.providers.anthropic import AnthropicClient

        return AnthropicClient(
            api_key, base_url, name=name, timeout=timeout, prices=prices, **policy
        )
    if kind == "openai":
        from agents.providers.openai import OpenAIClient

        return OpenAIClient(api_key, base_url, name=name, timeout=timeout, prices=prices, **policy)
    raise ValueError(f"unknown provider kind {kind!r}; expected one of {', '.join(KINDS)}")
