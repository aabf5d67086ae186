"""Benchmark 6: the text paths every reply takes, on ordinary and on hostile input.

`sanitize_output` runs on every reply (and on streamed previews), `split_markdown` on every
message sent, `SessionKey.parse` on keys read back from the store. Each must stay linear: a
megabyte of text built to defeat them (fence markers after every word, nested reasoning
tags, thousands of private-use characters, a deep sub-agent key) is measured next to an
ordinary reply. Figures are CPU time (process_time), the best of 3 rounds.

    .venv/bin/python -m bench.text
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

from agents.sanitize import sanitize_output
from bench.report import Report, parser
from bot.kernel.sessions import SessionKey
from channels.chunking import split_markdown

ORDINARY = (
    "Sure! Here is what I found.\n\n- **Milk** is in the fridge\n- `eggs` are out\n\n"
    "```python\nprint('hello')\n```\n\nAnything else?"
)
MEGABYTE = 1_000_000


def best_of_3(work: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return min(times)


def nested_reasoning(levels: int) -> str:
    return "<thi" * levels + "<think>x</think>" + "nk>y</think>" * levels


def main() -> None:
    args = parser(__doc__.splitlines()[0]).parse_args()
    report = Report("text", "6. Text paths: sanitizer, splitter, session keys")
    ms = 1000.0
    report.add(
        "sanitize_output, ordinary reply", best_of_3(lambda: sanitize_output(ORDINARY)) * 1e6, "µs"
    )
    hostile_sanitize = {
        "reasoning tags mid-sentence": "a <think>b</think> c " * (MEGABYTE // 21),
        "nested reasoning debris": nested_reasoning(MEGABYTE // 16),
        "private-use characters": "\ue000" * MEGABYTE,
        "inline code and fences": ("Use `x` here.\n\n```\ncode\n```\n") * (MEGABYTE // 30),
    }
    for label, text in hostile_sanitize.items():
        seconds = best_of_3(lambda text=text: sanitize_output(text))  # type: ignore[misc]
        report.add(f"sanitize_output, 1 MB of {label}", seconds * ms, "ms", target=1000)
    report.add(
        "split_markdown(4000), ordinary reply",
        best_of_3(lambda: split_markdown(ORDINARY, 4000)) * 1e6,
        "µs",
    )
    hostile_split = {
        '"a" + " ~~~" * 250,000': "a" + " ~~~" * 250_000,
        "fence lines only": "```\n" * 250_000,
        "one 1 MB word": "x" * MEGABYTE,
        "words": "word " * (MEGABYTE // 5),
    }
    for label, text in hostile_split.items():
        seconds = best_of_3(lambda text=text: split_markdown(text, 4000))  # type: ignore[misc]
        report.add(f"split_markdown(4000), {label}", seconds * ms, "ms", target=1000)

    def parse_huge() -> None:
        with contextlib.suppress(ValueError):
            SessionKey.parse("agent:main:sub:1:x:" * 55_000 + "agent:main:heartbeat")

    report.add("SessionKey.parse, 1 MB key (refused)", best_of_3(parse_huge) * ms, "ms", target=10)
    report.save(args.json)


if __name__ == "__main__":
    main()
