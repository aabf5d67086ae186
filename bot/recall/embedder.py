"""Texts to vectors through an OpenAI-compatible `/embeddings` endpoint (the `openai` SDK).

`Embedder.embed(texts, timeout)` sends one request and returns one unit-length float32 row
per text, in order, or raises `EmbeddingFailed` with a short reason fit for a log line
(never the key, never the answer's body): unreachable, no answer in time, an HTTP status, or
a malformed answer (missing rows, not numbers, another size than the others or than
`dimensions` asks, a zero vector). The SDK is imported on first use, off the event loop, and
runs as the model providers' clients do (`agents/providers/openai.py`): on its own aiohttp
client, no retries of its own.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.config.embeddings import EmbeddingsEndpoint

if TYPE_CHECKING:
    from openai import AsyncOpenAI

MAX_INPUT_CHARS = 8_000  # a document's stored text is no longer (search_rows.MAX_DOC_CHARS)


class EmbeddingFailed(Exception):
    """No usable vectors came back; the message says why, briefly."""


class Embedder:
    """One configured embeddings endpoint."""

    def __init__(self, endpoint: EmbeddingsEndpoint) -> None:
        self.endpoint = endpoint
        self._client: AsyncOpenAI | None = None

    def __repr__(self) -> str:  # never show the key
        return f"Embedder(space={self.endpoint.space!r}, base_url={self.endpoint.base_url!r})"

    async def _sdk(self) -> AsyncOpenAI:
        if self._client is None:
            await asyncio.to_thread(importlib.import_module, "openai")
            from openai import AsyncOpenAI, DefaultAioHttpClient

            self._client = AsyncOpenAI(
                api_key=self.endpoint.api_key or "none",  # local servers take any key
                base_url=self.endpoint.base_url,
                max_retries=0,
                http_client=DefaultAioHttpClient(),  # the SDK's own, on aiohttp
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def embed(self, texts: Sequence[str], timeout: float) -> np.ndarray:
        """One unit-length row per text (a matrix of len(texts) rows)."""
        client = await self._sdk()  # the SDK imported off the loop first
        import openai

        extra: dict[str, Any] = {}
        if self.endpoint.dimensions is not None:
            extra["dimensions"] = self.endpoint.dimensions
        inputs = [text[:MAX_INPUT_CHARS] or " " for text in texts]
        try:
            async with asyncio.timeout(timeout):
                answer = await client.embeddings.create(
                    input=inputs, model=self.endpoint.model, timeout=timeout, **extra
                )
        except (TimeoutError, openai.APITimeoutError):
            raise EmbeddingFailed(f"no answer within {timeout:g} s") from None
        except openai.APIConnectionError:
            raise EmbeddingFailed("unreachable") from None
        except openai.APIStatusError as exc:
            raise EmbeddingFailed(f"HTTP {exc.status_code}") from None
        except (openai.OpenAIError, ValueError, TypeError) as exc:
            raise EmbeddingFailed(f"a malformed answer ({type(exc).__name__})") from None
        return self._rows(answer, len(inputs))

    def _rows(self, answer: Any, count: int) -> np.ndarray:
        data = getattr(answer, "data", None)
        if not isinstance(data, list) or len(data) != count:
            raise EmbeddingFailed(f"a malformed answer (not {count} vectors)")
        try:
            ordered = sorted(data, key=lambda item: int(item.index))
            rows = np.array([list(item.embedding) for item in ordered], dtype=np.float32)
        except (AttributeError, TypeError, ValueError):
            raise EmbeddingFailed("a malformed answer (not lists of numbers)") from None
        if (
            rows.ndim != 2
            or rows.shape[1] == 0
            or [int(d.index) for d in ordered] != [*range(count)]
        ):
            raise EmbeddingFailed("a malformed answer (vectors of different sizes)")
        wanted = self.endpoint.dimensions
        if wanted is not None and rows.shape[1] != wanted:
            raise EmbeddingFailed(f"vectors of {rows.shape[1]} dimensions, not {wanted}")
        norms = np.linalg.norm(rows, axis=1)
        if not np.all(np.isfinite(norms)) or np.any(norms <= 1e-12):
            raise EmbeddingFailed("a malformed answer (an empty or not finite vector)")
        unit: np.ndarray = rows / norms[:, None]
        return unit
