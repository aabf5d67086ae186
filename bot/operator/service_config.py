"""The config of the system service, edited structurally: what `systemd/install.sh` runs.

`python -m bot.operator.service_config /etc/perch/config.yaml --state-dir /var/lib/perch
--credentials anthropic_api_key,...` writes the config the hardened unit can run: for a new
file, the shipped template with the workspace and database in the state directory (the only
writable place under `ProtectSystem=strict`), JSON logs for journald, the console off (a
service has no terminal), and each `${VAR}` whose name is one of the unit's credentials read
as `${cred:var}` instead. An existing config is kept, except what cannot work under the unit:
a relative workspace or store path (it would point into read-only /etc/perch) moves to the
state directory, and the console is turned off. Comments and key order are kept (ruamel
round trip; never text substitution); a changed file's old version is kept as a backup.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.operator.onboard_files import ENV_REF, config_template, set_key, write_config


def for_service(tree: Any, state: Path, credentials: Sequence[str], *, new: bool) -> list[str]:
    """Edit `tree` for the unit; returns what changed, one phrase each."""
    changed: list[str] = []

    def put(dotted: str, value: Any) -> None:
        node = tree
        for part in dotted.split(".")[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        current = node.get(dotted.rsplit(".", 1)[-1]) if isinstance(node, dict) else None
        if current != value:
            set_key(tree, dotted, value)
            changed.append(f"{dotted}: {value}")

    for dotted, leaf in (("agent.workspace", "workspace"), ("store.path", "perch.db")):
        section, key = dotted.split(".")
        current = str((tree.get(section) or {}).get(key) or "")
        if new or not current.startswith("/"):
            put(dotted, str(state / leaf))
    put("channels.console.enabled", False)
    if new:
        put("logging.format", "json")
        put("secrets.env_file", None)
        put("secrets.credentials_dir", None)  # systemd sets $CREDENTIALS_DIRECTORY
        changed += _credentials(tree, set(credentials))
    return changed


def _credentials(node: Any, names: set[str], where: str = "") -> list[str]:
    """Point each `${VAR}`/`${VAR:-}` of a unit credential at `${cred:var}`."""
    changed: list[str] = []
    if not isinstance(node, dict):
        return changed
    for key, value in node.items():
        path = f"{where}.{key}" if where else str(key)
        match = ENV_REF.fullmatch(value) if isinstance(value, str) else None
        if match and match.group(1).lower() in names:
            node[key] = "${cred:" + match.group(1).lower() + "}"
            changed.append(f"{path}: {node[key]}")
        elif isinstance(value, dict):
            changed += _credentials(value, names, path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.operator.service_config")
    parser.add_argument("config", type=Path)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--credentials", default="", help="the unit's credential names, a,b,c")
    args = parser.parse_args(argv)
    new = not args.config.exists()
    tree = config_template(args.config)
    names = [n for n in args.credentials.split(",") if n]
    changed = for_service(tree, args.state_dir, names, new=new)
    if not changed:
        print(f"{args.config}: already fit for the service; left as it was.")
        return 0
    backup = write_config(args.config, tree)
    print(f"Wrote {args.config}" + (f" (the old one is {backup})" if backup else "") + ":")
    for line in changed:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
