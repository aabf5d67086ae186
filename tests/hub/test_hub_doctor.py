"""`perch doctor`'s lines about webhooks and the API: secrets set, not guessable, not
shared, targets usable; never a secret in a line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.config.load import load_config
from bot.operator.doctor_hub import hub_checks

GOOD = "9f2c4e6a8b0d1f3e5a7c"
OTHER = "1a3b5c7d9e0f2a4b6c8d"


def lines(tmp_path: Path, data: dict[str, Any], env: dict[str, str] | None = None) -> str:
    path = tmp_path / "config.yaml"
    base = {"channels": {"console": {"enabled": False}}}
    path.write_text(yaml.safe_dump({**base, **data}))
    config = load_config(path, env or {}, lenient=True)
    return "\n".join(check.line() for check in hub_checks(config))


def test_good_secrets_pass_and_say_where_they_are_served(tmp_path: Path) -> None:
    text = lines(
        tmp_path,
        {
            "hooks": {
                "enabled": True,
                "endpoints": {"gh": {"secret": GOOD, "signature": "github"}},
            },
            "api": {"enabled": True, "tokens": [OTHER]},
        },
    )
    assert "OK    hook gh: github-signed, runs agent main" in text
    assert "OK    api: 1 token(s); models: main" in text
    assert "OK    hub listen: served on 127.0.0.1:8787" in text
    assert GOOD not in text and OTHER not in text


def test_weak_shared_unset_secrets_and_bad_targets_fail(tmp_path: Path) -> None:
    text = lines(
        tmp_path,
        {
            "hooks": {
                "enabled": True,
                "endpoints": {
                    "a": {"secret": "a" * 20},
                    "b": {"secret": GOOD, "deliver": "telegram:123"},
                    "c": {"secret": GOOD},
                    "d": {"secret": "${HOOK_SECRET_NOT_SET}"},
                },
            },
            "api": {"enabled": True, "tokens": [OTHER, OTHER]},
            "web": {"listen": "0.0.0.0:8787"},
        },
    )
    assert "FAIL  hook a: its secret is guessable" in text
    assert "FAIL  hook b deliver:" in text and "unknown or disabled channel 'telegram'" in text
    assert "FAIL  hook c: its secret is also hook b's" in text
    assert "FAIL  hook d: its secret is not set" in text
    assert "FAIL  api: two tokens are the same" in text
    assert "WARN  hub listen: served on 0.0.0.0:8787, reachable from other machines" in text
    assert GOOD not in text and OTHER not in text
