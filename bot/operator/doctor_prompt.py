"""`perch doctor`'s line on the prompt: the size of what every chat request begins with.

The tools and the system prompt stand before every conversation and are read from the
prompt cache together. The check builds them with the daemon's own graph, only the part it
needs (`bot.build.build_prompt`: the brain and the tool belt, no channels; MCP servers are not
started, so their tools are not counted) and prints the estimate `agents.prompt_size` makes
(4 characters a token): the tools, the persona, then memory and skills. Over `LARGE_PREFIX` tokens it warns: every request carries them.
"""

from __future__ import annotations

import logging

from agents.prompt_size import prefix_size
from bot.build_lite import build_prompt
from bot.config.schema import Config
from bot.kernel.session_facts import runtime_info
from bot.kernel.sessions import SessionKey
from bot.operator.checks import Check
from bot.store.open import open_store

log = logging.getLogger(__name__)

LARGE_PREFIX = 8_000


async def prompt_check(config: Config) -> Check:
    try:
        store = await open_store(config.store_target)
    except Exception as exc:
        return Check(False, "prompt", f"not measured: the database did not open ({exc})")
    brain = None
    try:
        brain, belt = build_prompt(config, store)
        key = SessionKey.dm(config.agent.id, "console", "local", "owner")
        runtime = runtime_info(config, key, None, config.agent.model)
        size = prefix_size(belt.tools.schemas(), belt.prompts.build("full", runtime))
    except Exception as exc:  # a bug here must not hide the other checks
        log.exception("doctor: measuring the prompt failed")
        return Check(False, "prompt", f"not measured: {exc}", "see the log; report it")
    finally:
        if brain is not None:
            await brain.aclose()
        await store.close()
    persona, *rest = size.system
    slow = sum(rest[:-1])  # the last block is the session's facts
    detail = (
        f"each request starts with ~{size.total:,} tokens: tools {size.tools:,}, persona "
        f"{persona:,}, memory and skills {slow:,} (estimated at 4 characters a token; "
        "MCP tools not counted)"
    )
    fix = "trim the persona files (AGENTS.md, SOUL.md, MEMORY.md ...) or turn tools off"
    return Check(True, "prompt", detail, fix, warn=size.total > LARGE_PREFIX)
