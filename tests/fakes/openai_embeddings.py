"""The fake OpenAI server's `POST /v1/embeddings` (served by `tests.fakes.openai.FakeOpenAI`).

It speaks the real wire format, so the real `openai` SDK parses it: `{"object": "list",
"data": [{"object": "embedding", "index": i, "embedding": ...}], "model", "usage"}`, each
vector base64 float32 (little-endian) when the request asks `encoding_format: base64` (what
the SDK asks by default) or a list of floats, `dimensions` honoured (default 1536, as
text-embedding-3-small). The vectors are deterministic: each word (lower case, a few stop
words left out) adds to three coordinates picked by its hash, after `SYNONYMS` maps it to
the word it stands for, so "which city is my home?" and "I live in Lisbon" point the same
way while texts sharing no word (nor synonym) are orthogonal but for rare collisions.
`Embeddings.fault` scripts a failure: `"http500"`, `"garbage"` (not JSON), `"short"` (too
few vectors), `"wrong_size"` (vectors of another size), `"hang"` (never answers).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

DIMENSIONS = 1536
SYNONYMS = {"city": "lisbon", "town": "lisbon", "home": "live", "lives": "live", "living": "live",
            "reside": "live", "boat": "sailing", "yacht": "sailing"}  # fmt: skip
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "do",
        "does",
        "i",
        "in",
        "is",
        "it",
        "my",
        "of",
        "the",
        "to",
        "what",
        "where",
        "which",
        "who",
        "you",
    ]
)
Fault = Literal["http500", "garbage", "short", "wrong_size", "hang"]


def fake_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    vector = [0.0] * dimensions
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]
    for word in words or ["(nothing)"]:
        digest = hashlib.blake2b(SYNONYMS.get(word, word).encode(), digest_size=12).digest()
        for n in range(3):  # three coordinates a word: two words rarely share them all
            vector[int.from_bytes(digest[4 * n : 4 * n + 4], "little") % dimensions] += 1.0
    return vector


@dataclass
class Embeddings:
    """What the endpoint was asked, and how it answers."""

    fault: Fault | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        """Every text embedded, in order."""
        return [t for body in self.requests for t in _inputs(body)]

    async def answer(self, body: dict[str, Any]) -> web.Response:
        self.requests.append(body)
        if self.fault == "hang":
            await asyncio.Event().wait()
        if self.fault == "http500":
            payload = {"error": {"message": "boom", "type": "server_error", "code": None}}
            return web.json_response(payload, status=500)
        if self.fault == "garbage":
            return web.Response(text="<html>not json</html>", content_type="application/json")
        texts = _inputs(body)
        if not texts or not all(isinstance(t, str) and t for t in texts):
            error = {
                "message": "'input' must be non-empty strings",
                "type": "invalid_request_error",
            }
            return web.json_response({"error": error}, status=400)
        size = int(body.get("dimensions") or DIMENSIONS)
        if self.fault == "wrong_size":
            size += 3
        if self.fault == "short":
            texts = texts[:-1]
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for n, text in enumerate(texts):
            vector = fake_vector(text, size)
            encoded: Any = (
                base64.b64encode(struct.pack(f"<{size}f", *vector)).decode()
                if as_base64
                else vector
            )
            data.append({"object": "embedding", "index": n, "embedding": encoded})
        tokens = sum(len(t) // 4 + 1 for t in texts)
        return web.json_response({
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        })  # fmt: skip


def _inputs(body: dict[str, Any]) -> list[Any]:
    texts = body.get("input")
    return [texts] if isinstance(texts, str) else list(texts or [])
