"""Model prices and context windows: what a call cost in USD, how many tokens fit.

Prices are USD per million tokens, matched by model family substring (older generations
first, so `claude-3-opus` is not priced as a current Opus). Prompt-cache writes cost 1.25x
the input price for 5 minutes and 2x for an hour (the API reports the two apart), cache
reads 0.1x. An unknown model is priced as Sonnet: a guess, never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.model import Usage

CACHE_WRITE_FACTOR = 1.25  # a 5-minute cache write
CACHE_WRITE_1H_FACTOR = 2.0  # a 1-hour cache write
CACHE_READ_FACTOR = 0.1
DEFAULT_CONTEXT_WINDOW = 200_000


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float


SONNET = Price(3.0, 15.0)

# First match wins: specific older generations before the family fallbacks.
_PRICES: tuple[tuple[str, Price], ...] = (
    ("claude-3-opus", Price(15.0, 75.0)),
    ("opus-4-0", Price(15.0, 75.0)),
    ("opus-4-1", Price(15.0, 75.0)),
    ("opus-4-2025", Price(15.0, 75.0)),
    ("opus", Price(5.0, 25.0)),
    ("sonnet", SONNET),
    ("claude-3-haiku", Price(0.25, 1.25)),
    ("3-5-haiku", Price(0.8, 4.0)),
    ("haiku", Price(1.0, 5.0)),
)


def price_for(model: str) -> Price:
    """The price of `model`, by family; Sonnet's price when the family is unknown."""
    name = model.lower()
    for needle, price in _PRICES:
        if needle in name:
            return price
    return SONNET


def cost_usd(model: str, usage: Usage, price: Price | None = None) -> float:
    """What a call with this usage cost, in USD (`price` overrides the table)."""
    price = price or price_for(model)
    per_token_in = price.input / 1_000_000
    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    return (
        usage.input_tokens * per_token_in
        + usage.output_tokens * price.output / 1_000_000
        + (usage.cache_write_tokens - hour) * per_token_in * CACHE_WRITE_FACTOR
        + hour * per_token_in * CACHE_WRITE_1H_FACTOR
        + usage.cache_read_tokens * per_token_in * CACHE_READ_FACTOR
    )


def usage_summary(usage: Usage) -> str:
    """Tokens and cost as people read them: `12,345 in (10,000 read from the prompt cache,
    1,500 written to it) / 800 out tokens, $0.0123`."""
    total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    cached = ""
    if usage.cache_read_tokens or usage.cache_write_tokens:
        cached = (
            f" ({usage.cache_read_tokens:,} read from the prompt cache, "
            f"{usage.cache_write_tokens:,} written to it)"
        )
    return f"{total:,} in{cached} / {usage.output_tokens:,} out tokens, ${usage.cost_usd:.4f}"


def context_window(model: str) -> int:
    """Tokens the model's prompt may hold. Every current Claude model: 200,000."""
    del model  # one window for all families today; kept per model for when that changes
    return DEFAULT_CONTEXT_WINDOW
