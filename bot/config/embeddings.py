"""`agent.recall.embeddings`: vectors for hybrid recall, only where a provider is named.

`{provider, model, dimensions, weight, timeout_s, floor, ceiling}`: `provider` names a
`providers.<name>` entry of `kind: openai` whose `/embeddings` endpoint turns memory notes,
skills and each recall's question into vectors (`bot/recall/vectors.py`). Without it (the
default) recall ranks by words alone. `embeddings_endpoint(wanted, providers)` resolves it,
raising a ValueError that names the key to fix, as `media.transcription` does.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.config.providers import ProvidersConfig

KEY = "agent.recall.embeddings"


class EmbeddingsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(min_length=1)  # a providers.<name> of kind: openai
    model: str = Field("text-embedding-3-small", min_length=1)
    dimensions: int | None = Field(None, ge=8, le=8192)  # None: the model's own
    weight: float = Field(0.5, ge=0.0, le=1.0)  # of the vector part in a note's score
    timeout_s: float = Field(3.0, gt=0, le=60)  # the one embedding on a turn's path
    floor: float = Field(0.2, ge=-1.0, lt=1.0)  # cosine at or below: unrelated (0)
    ceiling: float = Field(0.6, gt=-1.0, le=1.0)  # cosine at or above: the same thing (1)

    @model_validator(mode="after")
    def _floor_below_ceiling(self) -> EmbeddingsConfig:
        if self.floor >= self.ceiling:
            raise ValueError(
                f"floor ({self.floor:g}) must be below ceiling ({self.ceiling:g}): "
                "cosine similarities between them map to 0..1"
            )
        return self


@dataclass(frozen=True, slots=True)
class EmbeddingsEndpoint:
    """Where embedding requests go, and what the vectors are (`space` names them in the store:
    another provider, model or size makes another space, so no stale vector is ever used)."""

    provider: str
    base_url: str
    api_key: str
    model: str
    dimensions: int | None
    timeout_s: float

    @property
    def space(self) -> str:
        return f"{self.provider}/{self.model}/{self.dimensions or 'native'}"


def embeddings_endpoint(
    wanted: EmbeddingsConfig | None, providers: ProvidersConfig
) -> EmbeddingsEndpoint | None:
    """The endpoint `agent.recall.embeddings` (`wanted`) names among `providers`, or None when
    it is not configured.

    Raises ValueError naming the key to fix when the provider is missing or not `kind: openai`.
    """
    if wanted is None:
        return None
    found = providers.get(wanted.provider)
    if found is None:
        raise ValueError(
            f"{KEY}.provider: no provider {wanted.provider!r} under providers:; "
            f"add providers.{wanted.provider}: {{kind: openai, base_url: ..., api_key: ...}}"
        )
    if found.kind != "openai":
        raise ValueError(
            f"{KEY}.provider: providers.{wanted.provider} is kind {found.kind!r}; "
            "embeddings need a provider of kind: openai (an OpenAI-compatible /embeddings)"
        )
    base_url = (found.base_url or "https://api.openai.com/v1").rstrip("/")
    return EmbeddingsEndpoint(
        wanted.provider,
        base_url,
        found.api_key,
        wanted.model,
        wanted.dimensions,
        wanted.timeout_s,
    )
