"""The `providers:` section: kinds, defaults, the older keys, one-line errors, what /model
offers and which keys a start needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.errors import ConfigError
from bot.config.load import load_config, require_api_key
from bot.config.models import fallbacks, offered_models, split_model, used_providers


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, {})


def test_todays_anthropic_block_keeps_working(tmp_path: Path) -> None:
    config = load(
        tmp_path, "providers: {anthropic: {api_key: k}}\nagent: {fallback_models: [m2]}\n"
    )
    anthropic = config.providers.anthropic
    assert (anthropic.kind, anthropic.base_url) == ("anthropic", "https://api.anthropic.com")
    assert fallbacks(config) == ["m2"]
    require_api_key(config)


def test_openai_kind_with_models_prices_and_crossing_fallbacks(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "agent: {model: local/qwen3:8b, fallbacks: [claude-haiku-4-5, router/a/b]}\n"
        "providers:\n"
        "  local: {kind: openai, base_url: 'http://127.0.0.1:11434/v1', models: [qwen3:8b, phi4]}\n"
        "  router: {kind: openai, api_key: k, prices: {a/b: {input: 1, output: 2}}}\n",
    )
    assert split_model(config, "router/a/b") == ("router", "a/b")
    assert split_model(config, "claude-haiku-4-5") == ("anthropic", "claude-haiku-4-5")
    assert config.providers.get("router").base_url == "https://api.openai.com/v1"  # type: ignore[union-attr]
    assert used_providers(config) == ["local", "anthropic", "router"]
    assert offered_models(config) == [
        "local/qwen3:8b",
        "claude-haiku-4-5",
        "router/a/b",
        "local/phi4",
    ]
    with pytest.raises(ConfigError, match=r"providers\.anthropic\.api_key is empty"):
        require_api_key(config)  # a Claude fallback needs the key


def test_a_local_model_alone_needs_no_anthropic_key(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        "agent: {model: local/qwen3:8b}\n"
        "providers: {local: {kind: openai, base_url: 'http://127.0.0.1:11434/v1'}}\n",
    )
    require_api_key(config)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "providers: {x: {kind: gemini}}\n",
            "providers.x.kind: Input should be 'anthropic' or 'openai'",
        ),
        ("providers: {x: {kind: openai, modls: []}}\n", "providers.x.modls: unknown key"),
        ("providers: {'a/b': {kind: openai}}\n", "must be letters, digits"),
        ("providers: {x: {prices: {m: {input: -1, output: 1}}}}\n", "providers.x.prices.m.input"),
    ],
)
def test_bad_provider_config_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(tmp_path, text)
    assert expected in str(err.value) and "\n" not in str(err.value)
