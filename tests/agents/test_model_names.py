"""`<provider>/<model>` names: one parser, and the router, the config and `/model` all read a
name the way it does (a bare name or a head that is no configured provider means a model of
the default provider, `anthropic`; `/model` alone refuses a "/" that names no provider)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents.providers import make_provider
from agents.providers.model_names import ModelName, parse_model_name
from agents.providers.router import ModelRouter
from bot.config.load import load_config
from bot.config.models import display_model, split_model
from bot.config.schema import Config
from bot.hub.model_choice import ModelChoices
from bot.store.sqlite.store import SQLiteStore

PROVIDERS = ("anthropic", "local", "openrouter")

# name -> (provider, model, prefix, explicit)
TABLE = [
    ("claude-sonnet-5-5", ("anthropic", "claude-sonnet-5-5", None, False)),
    ("local/qwen3:8b", ("local", "qwen3:8b", "local", True)),
    ("anthropic/claude-haiku-4-5", ("anthropic", "claude-haiku-4-5", "anthropic", True)),
    ("openrouter/anthropic/claude-x", ("openrouter", "anthropic/claude-x", "openrouter", True)),
    ("local//x", ("local", "/x", "local", True)),
    ("qwen/qwen3", ("anthropic", "qwen/qwen3", "qwen", False)),  # no `qwen` provider
    ("Local/qwen3", ("anthropic", "Local/qwen3", "Local", False)),  # names are case-sensitive
    ("local/", ("anthropic", "local/", "local", False)),  # nothing after the slash
    ("/x", ("anthropic", "/x", "", False)),
    ("", ("anthropic", "", None, False)),
]


@pytest.mark.parametrize(("name", "expected"), TABLE)
def test_a_model_name_is_read_against_the_configured_providers(
    name: str, expected: tuple[str, str, str | None, bool]
) -> None:
    assert parse_model_name(name, PROVIDERS) == ModelName(*expected)


def test_the_default_provider_is_the_callers_and_shown_bare() -> None:
    parsed = parse_model_name("gpt-x", PROVIDERS, default="local")
    assert (parsed.provider, parsed.qualified, parsed.shown("local")) == (
        "local",
        "local/gpt-x",
        "gpt-x",
    )
    assert parse_model_name("local/gpt-x", PROVIDERS).shown() == "local/gpt-x"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(
        "providers:\n"
        "  anthropic: {api_key: k}\n"
        "  local: {kind: openai, base_url: 'http://127.0.0.1:9/v1', api_key: none}\n"
        "  openrouter: {kind: openai, base_url: 'http://127.0.0.1:9/v1', api_key: k}\n"
    )
    return load_config(path, {})


@pytest.mark.parametrize(("name", "expected"), TABLE)
def test_the_router_and_the_config_split_a_name_the_same_way(
    config: Config, name: str, expected: tuple[str, str, str | None, bool]
) -> None:
    provider, model, _prefix, _explicit = expected
    clients = {
        key: make_provider("openai", name=key, api_key="none", base_url=None, timeout=5)
        for key in PROVIDERS
    }
    router = ModelRouter(clients)
    assert router.split(name) == split_model(config, name) == (provider, model)
    assert router.display(name) == display_model(config, name)


@pytest.fixture
async def choices(tmp_path: Path, config: Config) -> AsyncIterator[ModelChoices]:
    store = await SQLiteStore.open(tmp_path / "perch.db")
    try:
        yield ModelChoices(store, config)
    finally:
        await store.close()


@pytest.mark.parametrize(("name", "expected"), TABLE[:-1])  # "" lists the models instead
async def test_model_command_takes_a_name_unless_its_slash_names_no_provider(
    choices: ModelChoices, name: str, expected: tuple[str, str, str | None, bool]
) -> None:
    _provider, _model, prefix, explicit = expected
    answer = await choices.command("telegram:dm:ada", name)
    if prefix is not None and not explicit:
        assert answer.startswith(f"Unknown provider {prefix!r} in {name!r}.")
        assert await choices.chosen("telegram:dm:ada") == ""
    else:
        assert answer.startswith("This chat now uses ")
