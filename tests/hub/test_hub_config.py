"""The hub's config sections: agents filled in from `agent:`, their own workspaces, and
bindings, hooks and api checked against each other with errors that name the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config.errors import ConfigError
from bot.config.load import load_config

SECRET = "s" * 20


def load(tmp_path: Path, data: dict[str, Any]) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"channels": {"console": {"enabled": False}}, **data}))
    return load_config(path, {})


def test_an_agent_takes_what_it_leaves_out_from_agent_but_never_the_workspace(
    tmp_path: Path,
) -> None:
    config = load(
        tmp_path,
        {
            "agent": {"model": "claude-sonnet-5-5", "max_iterations": 7, "workspace": "./ws"},
            "agents": [{"id": "work", "model": "claude-haiku-4-5"}],
        },
    )
    work = config.for_agent("work")
    assert (work.agent.id, work.agent.model, work.agent.max_iterations) == (
        "work",
        "claude-haiku-4-5",
        7,
    )
    assert work.workspace == tmp_path / "workspace-work"
    assert config.for_agent("main") is config and config.agent_ids() == ["main", "work"]
    with pytest.raises(KeyError):
        config.for_agent("nobody")


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"agents": [{"id": "main"}]}, "the id 'main' is used twice"),
        ({"agents": [{"id": "a"}, {"id": "a"}]}, "the id 'a' is used twice"),
        ({"agents": [{"id": "a", "workspace": "./workspace"}]}, "share the workspace"),
        ({"agents": [{"id": "a", "modle": "x"}]}, "agents.0.modle"),
        ({"bindings": [{"agent": "ghost", "channel": "slack"}]}, "bindings.0.agent"),
        ({"bindings": [{"agent": "main"}]}, "at least one of channel"),
        ({"bindings": [{"agent": "main", "chat": "1", "peer": "2"}]}, "not both"),
        ({"hooks": {"endpoints": {"gh": {"secret": "short"}}}}, "at least 16 characters"),
        (
            {"hooks": {"endpoints": {"gh": {"secret": SECRET, "agent": "x"}}}},
            "hooks.endpoints.gh.agent",
        ),
        ({"hooks": {"endpoints": {"a b": {"secret": SECRET}}}}, "endpoint name"),
        ({"api": {"enabled": True}}, "at least one token"),
        ({"api": {"tokens": ["short"]}}, "shorter than 16"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(
    tmp_path: Path, data: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError) as error:
        load(tmp_path, data)
    assert words in str(error.value)


def test_hook_secrets_and_api_tokens_are_never_logged(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        {
            "hooks": {"endpoints": {"gh": {"secret": SECRET}}},
            "api": {"tokens": ["t" * 24]},
        },
    )
    assert SECRET in config.secret_values() and "t" * 24 in config.secret_values()
