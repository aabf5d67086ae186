"""`perch doctor`: check that everything Perch needs is in place, one line per check.

Each check prints `OK` or `FAIL` with what it found and, on failure, what to do. It checks the
config, each model provider (`bot.operator.doctor_models`: key accepted, model listed), each enabled
channel's credentials against its platform (the plug-in's `probe`), each enabled MCP server
(it must start and list its tools), the database (opens, migrates, takes the write lock), the
workspace files, the size of the prompt every request begins with (`doctor_prompt.py`), the
timezone, the skills and web search (`doctor_skills.py`). Exit code 0 when everything passed, 1 otherwise, 78 when
the config itself cannot be read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from functools import partial
from zoneinfo import ZoneInfo

import httpx

from bot.config.schema import Config
from bot.operator.checks import Check
from bot.operator.doctor_exec import exec_checks
from bot.operator.doctor_mcp import doctor_checks as mcp_doctor_checks
from bot.operator.doctor_models import model_checks
from bot.operator.doctor_prompt import prompt_check
from bot.operator.doctor_skills import search_check, skill_checks
from bot.store.open import open_store
from bot.store.urls import redact_url
from bot.workspace import bootstrap_dir
from channels import registry
from channels.options import ChannelOptions
from channels.plugin import Probe

TIMEOUT = 10.0


async def run_checks(config: Config) -> list[Check]:
    checks: list[Check] = [Check(True, "config", f"{config.source} is valid")]
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as http:
        model_probe = asyncio.create_task(_models(config, http))
        probes: list[Callable[[], Awaitable[Check]]] = []
        for name in config.channels.enabled():
            plugin, options = registry.get(name), config.channels.options(name)
            if plugin is not None and plugin.probe is not None and options is not None:
                probes.append(partial(_channel, name, options, plugin.probe, http))
        checks.extend(await model_probe)
        checks.extend(await asyncio.gather(*(probe() for probe in probes)))
    checks.extend(await mcp_doctor_checks(config))
    checks.append(await _database(config))
    checks.append(_workspace(config))
    checks.append(await prompt_check(config))
    checks.append(_timezone(config))
    checks.extend(exec_checks(config))
    checks.extend(skill_checks(config))
    checks.append(await search_check(config))
    return checks


async def _models(config: Config, http: httpx.AsyncClient) -> list[Check]:
    return [Check(*result) for result in await model_checks(config, http)]


async def _channel(
    name: str, options: ChannelOptions, probe: Probe, http: httpx.AsyncClient
) -> Check:
    """One enabled channel's plug-in probe, as a doctor line."""
    try:
        result = await probe(options, http)
    except Exception as exc:  # a probe bug must not hide the other checks
        return Check(False, name, f"the probe failed: {exc}", "see the log; report it")
    return Check(result.ok, name, result.detail, result.fix)


async def _database(config: Config) -> Check:
    """Open (and migrate) the store, check a write transaction and the schema version."""
    where = config.store_target
    if config.store.url:
        shown = redact_url(config.store.url)
        fix_open = "check store.url and that the PostgreSQL server runs and accepts you"
        fix_write = "grant the store.url user write access (and use the primary server)"
    else:
        shown = str(where)
        fix_open = f"make {config.db_path.parent} writable by the service user"
        fix_write = f"make {where} writable by the service user"
    try:
        store = await open_store(where)
    except Exception as exc:
        return Check(False, "database", f"{shown}: {exc}", fix_open)
    try:
        version = await store.schema_version()
        await store.check_writable()
    except Exception as exc:
        return Check(False, "database", f"{shown}: not writable ({exc})", fix_write)
    finally:
        await store.close()
    if version != store.latest_schema:
        return Check(
            False,
            "database",
            f"schema {version}, expected {store.latest_schema}",
            "restart Perch to migrate",
        )
    return Check(True, "database", f"{store.location} writable, schema {version}")


def _workspace(config: Config) -> Check:
    workspace = config.workspace
    if not workspace.is_dir():
        return Check(False, "workspace", f"{workspace} does not exist", "run: perch init")
    templates = bootstrap_dir()
    names = sorted(p.name for p in templates.glob("*.md")) if templates.is_dir() else []
    missing = [n for n in names if not (workspace / n).exists()]
    if missing:
        return Check(False, "workspace", f"missing {', '.join(missing)}", "run: perch init")
    return Check(True, "workspace", f"{workspace} has {len(names)} persona files")


def _timezone(config: Config) -> Check:
    tz = config.agent.timezone
    now = time.strftime("%Y-%m-%d %H:%M")
    try:
        from datetime import datetime

        local = datetime.now(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")
    except Exception as exc:
        return Check(False, "timezone", f"{tz}: {exc}", "set agent.timezone (e.g. Europe/Berlin)")
    return Check(True, "timezone", f"{tz}: {local} (system clock {now})")


def doctor(config: Config) -> int:
    checks = asyncio.run(run_checks(config))
    for check in checks:
        print(check.line())
    failed = sum(not c.ok for c in checks)
    print(f"Doctor: {failed} of {len(checks)} checks failed." if failed else "All checks passed.")
    return 1 if failed else 0
