"""A model of Anthropic's prompt cache, for the fake Messages API and the cache benchmark.

`PromptCache.account(body, now)` takes one request body (parsed JSON) and answers the `usage`
the real API would report for it: `input_tokens` (after the last cached breakpoint),
`cache_read_input_tokens`, `cache_creation_input_tokens` and its split
`cache_creation.ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`. The rules follow
Anthropic's prompt-caching documentation:
- the prompt is the blocks in the order tools -> system -> messages (each tool definition,
  system block and message content block is one block; a plain string is one block);
- a block with `cache_control` is a breakpoint; at most 4 per request (more is a 400, as from
  the API), and a breakpoint with `ttl: 1h` may not follow one with the default 5m (a 400 too);
- a prefix is cached under the hash of its blocks' bytes (`cache_control` itself left out, so a
  moving breakpoint still finds what an earlier one wrote), per model; a prefix shorter than
  `min_tokens` (1,024 for Sonnet) is not cached at all;
- entries are written only at breakpoints. To read, the API looks back from each breakpoint
  over at most 20 block boundaries (the breakpoint's own included) for the longest prefix
  still cached; what lies between that hit and the last breakpoint is written, what follows
  the last breakpoint is plain input;
- an entry lives 5 minutes (or 1 hour) from its last use: a read or a write refreshes it.
Tokens are estimated as Perch does (`agents.history.estimate_tokens`: 4 characters a token,
1,600 per image): the model is about which tokens are read or written, not their exact count.
`requests` keeps one `CacheUse` per request for the benchmark.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

LOOKBACK = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1600
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class CacheRuleError(ValueError):
    """A request the real API refuses with 400 invalid_request_error."""


@dataclass(slots=True)
class CacheUse:
    """What one request read, wrote and paid plain input for (tokens)."""

    input: int = 0
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    tag: str = ""

    @property
    def write(self) -> int:
        return self.write_5m + self.write_1h

    @property
    def total(self) -> int:
        return self.input + self.read + self.write

    def usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input,
            "cache_read_input_tokens": self.read,
            "cache_creation_input_tokens": self.write,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.write_5m,
                "ephemeral_1h_input_tokens": self.write_1h,
            },
        }


@dataclass(frozen=True, slots=True)
class _Block:
    key: bytes  # the hash of the prompt up to and including this block
    tokens: int
    ttl: str | None  # the breakpoint's ttl, None when the block is no breakpoint


@dataclass(slots=True)
class PromptCache:
    min_tokens: int = 1024
    entries: dict[bytes, float] = field(default_factory=dict)  # prefix hash -> expiry
    requests: list[CacheUse] = field(default_factory=list)

    def account(self, body: dict[str, Any], now: float, tag: str = "") -> CacheUse:
        """The usage of `body` sent at `now` (seconds), and the cache after it."""
        blocks = prompt_blocks(body)
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        _check_marks([blocks[i].ttl or "5m" for i in marks])
        ends = _cumulative([b.tokens for b in blocks])
        cacheable = [i for i in marks if ends[i] >= self.min_tokens]
        hit = -1
        hit_ttl = "5m"
        for mark in cacheable:
            for j in range(mark, max(mark - LOOKBACK, -1), -1):
                if self.entries.get(blocks[j].key, float("-inf")) > now:
                    if j > hit:
                        hit, hit_ttl = j, blocks[mark].ttl or "5m"
                    break
        use = CacheUse(tag=tag)
        use.read = ends[hit] if hit >= 0 else 0
        done = hit
        for mark in cacheable:
            if mark <= done:
                continue
            tokens = ends[mark] - (ends[done] if done >= 0 else 0)
            if blocks[mark].ttl == "1h":
                use.write_1h += tokens
            else:
                use.write_5m += tokens
            done = mark
        last = ends[done] if done >= 0 else 0
        use.input = (ends[-1] if ends else 0) - last
        if hit >= 0:
            self._touch(blocks[hit].key, now + TTL_SECONDS[hit_ttl])
        for mark in cacheable:
            self._touch(blocks[mark].key, now + TTL_SECONDS[blocks[mark].ttl or "5m"])
        self.requests.append(use)
        return use

    def _touch(self, key: bytes, expiry: float) -> None:
        self.entries[key] = max(self.entries.get(key, float("-inf")), expiry)


def prompt_blocks(body: dict[str, Any]) -> list[_Block]:
    """The request as the cache sees it: one entry per block, tools -> system -> messages."""
    digest = hashlib.sha256(_encode(["model", body.get("model")]).encode())
    out: list[_Block] = []

    def add(section: str, block: Any) -> None:
        ttl = None
        if isinstance(block, dict) and isinstance(block.get("cache_control"), dict):
            ttl = str(block["cache_control"].get("ttl", "5m"))
            block = {k: v for k, v in block.items() if k != "cache_control"}
        digest.update(_encode([section, block]).encode())
        out.append(_Block(digest.copy().digest(), block_tokens(block), ttl))

    for tool in body.get("tools") or []:
        add("tool", tool)
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        add("system", block)
    for index, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            add(f"{message.get('role')}:{index}", block)
    return out


def block_tokens(block: Any) -> int:
    """A block's tokens by Perch's estimate: characters / 4, 1,600 per image."""
    if isinstance(block, dict) and block.get("type") == "image":
        return IMAGE_TOKENS
    if isinstance(block, dict) and block.get("type") == "text":
        return -(-len(str(block.get("text", ""))) // CHARS_PER_TOKEN)
    if isinstance(block, dict) and block.get("type") == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return sum(block_tokens(part) for part in content) + 8
    return -(-len(_encode(block)) // CHARS_PER_TOKEN)


def _cumulative(values: list[int]) -> list[int]:
    total, out = 0, []
    for value in values:
        total += value
        out.append(total)
    return out


def _check_marks(ttls: list[str]) -> None:
    if len(ttls) > MAX_BREAKPOINTS:
        raise CacheRuleError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(ttls)}."
        )
    for ttl in ttls:
        if ttl not in TTL_SECONDS:
            raise CacheRuleError(f"cache_control.ttl: Input should be '5m' or '1h', got {ttl!r}")
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise CacheRuleError(
            "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"
        )
