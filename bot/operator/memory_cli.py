"""`perch memory search QUERY` and `perch memory rebuild`: the search index from the shell.

Both go to the running daemon over its control socket, or, with none running, open the
store themselves (`bot/operator/ops_memory.py`); neither needs the model key. `search`
shows what recall and `memory_search` would find, in every chat's scope (`--source` narrows
it to memory, sessions or skills; `--json` for scripts); `rebuild` indexes the memory files,
every stored conversation and the skills again, from scratch.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.operator.control_client import run_command
from bot.store.search_rows import SOURCES


def register(sub: Any, add: Any) -> None:
    """Add `perch memory` to the parser (called by `bot.operator.cli.build_parser`)."""
    memory = add("memory", cmd_memory, "search the index of notes, conversations and skills")
    actions = memory.add_subparsers(dest="action", required=True)
    search = actions.add_parser("search", help="what the index holds about some words, best first")
    search.add_argument("query", nargs="+", help="the words to look for")
    search.add_argument(
        "--source", action="append", choices=SOURCES, help="only this source (repeatable)"
    )
    search.add_argument("--limit", type=int, default=10, help="hits shown (default 10)")
    search.add_argument("--min-score", type=float, default=0.0, help="hide weaker hits (0-1)")
    search.add_argument("--json", action="store_true", help="one JSON list, for scripts")
    search.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    rebuild = actions.add_parser(
        "rebuild", help="index the memory files, conversations and skills again"
    )
    rebuild.add_argument("--config", default=argparse.SUPPRESS, help="config file")


def cmd_memory(args: argparse.Namespace) -> int:
    if args.action == "rebuild":
        return run_command(args, "memory.rebuild", {})
    request = {
        "query": " ".join(args.query),
        "sources": args.source,
        "limit": args.limit,
        "min_score": args.min_score,
        "json": args.json,
    }
    return run_command(args, "memory.search", request)
