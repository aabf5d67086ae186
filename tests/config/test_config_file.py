"""The shipped config.yaml: valid, and every key of the config model is in it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from bot.config.load import load_config
from bot.config.schema import Config

SHIPPED = Path(__file__).resolve().parents[2] / "config.yaml"
ENV = {"ANTHROPIC_API_KEY": "sk-ant-test"}
LEGACY = {"fallback_models"}  # still read, named in a comment beside `fallbacks`


def missing_keys(model: type[BaseModel], data: dict[str, Any], where: str = "") -> list[str]:
    missing: list[str] = []
    for name, field in model.model_fields.items():
        if field.exclude or name == "root":  # `root`: a mapping of named entries
            continue
        if "older name" in (field.description or "") or name in LEGACY:
            continue
        path = f"{where}{name}"
        if name not in data:
            missing.append(path)
            continue
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel) and isinstance(data[name], dict):
            missing += missing_keys(kind, data[name], path + ".")
    return missing


def test_shipped_config_is_valid_and_lists_every_key() -> None:
    load_config(SHIPPED, ENV)
    data = yaml.safe_load(SHIPPED.read_text())
    assert missing_keys(Config, data) == []
    text = SHIPPED.read_text()
    assert "# target: {channel: telegram, to:" in text  # the explicit heartbeat target form


def test_every_key_line_says_what_it_is_for() -> None:
    bare = [
        line
        for line in SHIPPED.read_text().splitlines()
        if line.strip()
        and not line.lstrip().startswith("#")
        and "#" not in line
        and not line.rstrip().endswith(":")  # a section heading
    ]
    assert bare == []
