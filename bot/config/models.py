"""The configured models: what `agent.model`, the fallbacks and `providers:` make together.

Model names are `<provider>/<model>`, a bare name meaning the `anthropic` provider
(`agents.providers.model_names`). `build_router` makes the one `ModelClient` of the daemon;
`offered_models` is what `/model` lists; `missing_key` is the complaint when a used provider
has no key. These read the whole `Config`, so they sit above `schema.py`, not in the
`providers:` section's module.
"""

from __future__ import annotations

from agents.observer import NO_OBSERVER, RunObserver
from agents.providers.model_names import DEFAULT_PROVIDER, parse_model_name
from agents.providers.router import ModelRouter
from bot.config.schema import Config


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
