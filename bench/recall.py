"""Benchmark 13: what the search index costs a turn, at 10,000 notes and 100,000 messages.

A workspace with 10,000 memory notes (200 daily files of 50) and a store with 100,000
messages (1,000 DM sessions of 100), in text drawn from a 30,000-word vocabulary with
Zipf's law (as words are in chats), indexed once (`SearchIndex.ensure_built` and
`refresh`: the time is reported). Then each turn does what `TurnRunner` does around its
model call: the recall (`TurnRecall.blocks`: the memory files' stamps, the query, the
visible candidates, the scores, the block) and, after the save, `index_run` of the user's
message and the answer, in a new session of one of the stored people (as after /new, so
their earlier conversation is theirs to recall). Every other message is related (five words
of one of that person's stored messages), the others unrelated (6 to 25 words from the same
law). Figures: wall time and CPU time per turn (median and p95 of `--turns`), and how many
related and unrelated turns recalled something.
`--postgresql` runs the same against a throwaway PostgreSQL server (its binaries needed).

With embeddings (`agent.recall.embeddings`): the same 10,000 notes embedded through the real
`openai` SDK by the fake OpenAI server (`tests/fakes/openai_embeddings.py`; `--dimensions`:
text-embedding-3-small's own 1536 and 512, its shortened size; the time is reported), then per turn what the
vectors add besides the question's one request: the nearest notes among those the chat may
see (`VectorIndex.closest`, one matrix product) and the blend with the words' candidates
(the question's vector is asked beforehand, so the fake server's latency is left out), and
apart, the whole hybrid search with that request to the fake on loopback.

    .venv/bin/python -m bench.recall [--turns 300] [--notes 10000] [--messages 100000]
        [--dimensions 1536 512]
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from agents.model import Message
from bench.report import Report, parser, percentile
from bot.config.agent import RecallConfig
from bot.config.embeddings import EmbeddingsConfig, EmbeddingsEndpoint
from bot.kernel.sessions import SessionKey
from bot.recall.embedder import Embedder
from bot.recall.hybrid import blend
from bot.recall.index import SearchIndex
from bot.recall.turn_recall import TurnRecall
from bot.recall.vectors import VectorIndex
from bot.recall.visibility import visible_scopes
from bot.store.open import open_store
from bot.store.roles import Store
from bot.store.rows import encode_message
from bot.store.search_rows import CANDIDATES, SearchQuery

TARGET_MS = 2.0
VOCABULARY = 30_000
SESSIONS = 1_000


def vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ter", "san", "vo", "ril", "den", "pa", "shu", "ne", "gor",
                 "ta", "bel", "fi", "mon", "ru", "zan", "eck", "ola"]  # fmt: skip
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Words:
    """Text with Zipf's law over the vocabulary."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(rng)
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]

    def text(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        return " ".join(self.rng.choices(self.words, self.weights, k=count)).capitalize() + "."


def write_notes(workspace: Path, words: Words, notes: int) -> None:
    folder = workspace / "memory"
    folder.mkdir(parents=True)
    per_file = 50
    for day in range(notes // per_file):
        lines = [f"# 2025-{day // 28 % 12 + 1:02d}-{day % 28 + 1:02d}", ""]
        lines += [f"- {9 + n % 12:02d}:{n % 60:02d} {words.text(6, 30)}" for n in range(per_file)]
        (folder / f"2025-{day // 28 % 12 + 1:02d}-{day % 28 + 1:02d}-{day}.md").write_text(
            "\n".join(lines) + "\n"
        )


Person = tuple[SessionKey, str, list[str]]  # key, session id, what was said there


async def store_messages(store: Store, words: Words, messages: int) -> list[Person]:
    sessions: list[Person] = []
    rows = []
    now = time.time() - 86_400 * 30
    for n in range(SESSIONS):
        key = SessionKey.dm("main", "telegram", "default", str(10_000 + n))
        session_id = uuid.uuid4().hex
        sessions.append((key, session_id, []))
        rows.append((session_id, str(key), False, now, now, "", 0, "", 0, 0, 0, 0, 0.0, 0, ""))
    await store.load("sessions", rows)
    batch = []
    for n in range(messages):
        key, session_id, said = sessions[n % SESSIONS]
        role = "user" if n // SESSIONS % 2 == 0 else "assistant"
        text = words.text(4, 40)
        said.append(text)
        message: Message = {"role": role, "content": [{"type": "text", "text": text}]}
        batch.append((n + 1, session_id, *encode_message(message), "", now + n))
        if len(batch) == 5_000:
            await store.load("messages", batch)
            batch = []
    if batch:
        await store.load("messages", batch)
    await store.finish_load()
    return sessions


async def measure(report: Report, store: Store, root: Path, args: object, label: str) -> None:
    rng = random.Random(34)
    words = Words(rng)
    workspace = root / "workspace"
    write_notes(workspace, words, args.notes)  # type: ignore[attr-defined]
    sessions = await store_messages(store, words, args.messages)  # type: ignore[attr-defined]
    index = SearchIndex(store, workspace)
    began = time.perf_counter()
    await index.refresh()
    await index.ensure_built()
    report.add(f"{label}: build the index (notes and messages)", time.perf_counter() - began, "s")
    recall = TurnRecall(RecallConfig(), index, {})
    walls, cpus, found = [], [], {True: 0, False: 0}
    for turn in range(args.turns):  # type: ignore[attr-defined]
        key, _, said = sessions[rng.randrange(len(sessions))]
        session_id = uuid.uuid4().hex  # a new session of theirs
        related = turn % 2 == 0
        if related:
            earlier = rng.choice(said).rstrip(".").split()
            text = " ".join(rng.sample(earlier, min(5, len(earlier)))) + "?"
        else:
            text = words.text(6, 25)
        history: list[Message] = [
            {"role": "user", "content": [{"type": "text", "text": words.text(4, 20)}]}
        ]
        answer: Message = {
            "role": "assistant",
            "content": [{"type": "text", "text": words.text(10, 40)}],
        }
        wall, cpu = time.perf_counter(), time.process_time()
        blocks = await recall.blocks(key, session_id, text, history)
        user: Message = {"role": "user", "content": [{"type": "text", "text": text}]}
        await index.index_run(key, session_id, [user, answer])
        walls.append((time.perf_counter() - wall) * 1e3)
        cpus.append((time.process_time() - cpu) * 1e3)
        found[related] += bool(blocks)
    report.add(
        f"{label}: per turn, recall + indexing the run, median",
        statistics.median(walls),
        "ms",
        target=TARGET_MS,
    )
    report.add(f"{label}: per turn, p95", percentile(walls, 95), "ms")
    report.add(f"{label}: per turn, CPU (all threads), median", statistics.median(cpus), "ms")
    half = len(walls) / 2
    report.add(f"{label}: related turns that recalled something", 100 * found[True] / half, "%")
    report.add(f"{label}: unrelated turns that recalled something", 100 * found[False] / half, "%")


async def measure_vectors(
    report: Report, store: Store, root: Path, args: object, dims: int
) -> None:
    from tests.fakes.openai import FakeOpenAI

    rng = random.Random(35)
    words = Words(rng)
    workspace = root / "workspace"
    write_notes(workspace, words, args.notes)  # type: ignore[attr-defined]
    label = f"embeddings ({dims} dimensions)"
    async with FakeOpenAI(api_key="bench") as fake:
        settings = EmbeddingsConfig(provider="bench", dimensions=dims)
        endpoint = EmbeddingsEndpoint("bench", fake.base_url, "bench", settings.model, dims, 5.0)
        vectors = VectorIndex(store, Embedder(endpoint), settings)
        index = SearchIndex(store, workspace, vectors=vectors)
        began = time.perf_counter()
        await index.refresh()
        await index.settle()
        report.add(f"{label}: index and embed {vectors.count():,} notes", time.perf_counter() - began, "s")  # fmt: skip
        owner = SessionKey.dm("main", "cli", "default", "owner")  # sees the notes
        vector_ms, whole_ms = [], []
        for _ in range(args.turns):  # type: ignore[attr-defined]
            query = SearchQuery.of(
                words.text(6, 25), scopes=visible_scopes(owner, {}), limit=5, min_score=0.5
            )
            (asked,) = await vectors.embedder.embed([query.text], 5.0)
            text_hits = await store.search(SearchQuery.of(query.text, scopes=query.scopes,
                                                          limit=CANDIDATES))  # fmt: skip
            began = time.perf_counter()
            near = vectors.closest(asked, query)
            blend(query, text_hits, near.top, near.cosine, weight=0.5, floor=0.2, ceiling=0.6)
            vector_ms.append((time.perf_counter() - began) * 1e3)
            began = time.perf_counter()
            await index.search(query)
            whole_ms.append((time.perf_counter() - began) * 1e3)
        report.add(f"{label}: per turn, the vectors' part (nearest + blend), median",
                   statistics.median(vector_ms), "ms", target=TARGET_MS)  # fmt: skip
        report.add(f"{label}: per turn, the vectors' part, p95", percentile(vector_ms, 95), "ms")
        report.add(f"{label}: per turn, the whole hybrid search incl. the fake server's round trip, median",
                   statistics.median(whole_ms), "ms")  # fmt: skip
        await index.aclose()


async def run(args: object) -> None:
    report = Report(
        "recall", "13. Recall: the search index per turn (10,000 notes, 100,000 messages)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_store(Path(tmp) / "data" / "perch.db")
        try:
            await measure(report, store, Path(tmp), args, "SQLite")
        finally:
            await store.close()
    for dimensions in args.dimensions:  # type: ignore[attr-defined]
        with tempfile.TemporaryDirectory() as tmp:
            store = await open_store(Path(tmp) / "data" / "perch.db")
            try:
                await measure_vectors(report, store, Path(tmp), args, dimensions)
            finally:
                await store.close()
    if args.postgresql:  # type: ignore[attr-defined]
        from tests.store_backends import new_database, throwaway_postgres

        with throwaway_postgres() as server, tempfile.TemporaryDirectory() as tmp:
            if server is None:
                report.note("no PostgreSQL binaries: the PostgreSQL figures are left out")
            else:
                store = await open_store(await new_database(server))
                try:
                    await measure(report, store, Path(tmp), args, "PostgreSQL")
                finally:
                    await store.close()
    report.save(args.json)  # type: ignore[attr-defined]


def main() -> None:
    cli = parser(__doc__.splitlines()[0])
    cli.add_argument("--turns", type=int, default=300)
    cli.add_argument("--notes", type=int, default=10_000)
    cli.add_argument("--messages", type=int, default=100_000)
    cli.add_argument("--postgresql", action="store_true", help="also on a throwaway PostgreSQL")
    cli.add_argument("--dimensions", type=int, nargs="*", default=[1536, 512],
                     help="the embeddings' sizes measured (none: no embeddings)")  # fmt: skip
    asyncio.run(run(cli.parse_args()))


if __name__ == "__main__":
    main()
