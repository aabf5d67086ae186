"""Structured session keys: which conversation a run, a history and a lane belong to.

`SessionKey` formats and parses the `agent:<agentId>:...` strings of DESIGN.md section 2
(DM, group, thread, sub-agent, cron, heartbeat) with a lossless round trip. Pure: no I/O.

Decisions not spelled out in DESIGN.md:
- Components are percent-encoded for `%` and `:` only (`%` -> `%25`, then `:` -> `%3A`).
  Parsing is strict so one key has exactly one spelling: any other `%` sequence
  (`%3a`, `%41`, a lone `%`) is rejected rather than decoded.
- `sub`, `cron` and `heartbeat` cannot be channel names (they would make keys ambiguous).
- A sub-agent key belongs to the same agent as its parent, and nests at most `MAX_DEPTH`
  deep (far above the `max_spawn_depth` ceiling of 5) so a crafted key cannot blow the stack.
- `is_group` is about the key itself: a sub-agent spawned from a group is not a group key
  (ask `key.root.is_group`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

from channels.base import ChatRef

SessionKind = Literal["dm", "group", "sub", "cron", "heartbeat"]

MAX_DEPTH = 32
"""Deepest sub-agent nesting a key may describe."""

MAX_KEY_CHARS = 16_384
"""Longest string `SessionKey.parse` reads; anything longer is refused before any parsing."""

RESERVED_CHANNELS = frozenset({"sub", "cron", "heartbeat"})
"""Words in the channel position that mark another key form, so no channel may use them."""

_KINDS: frozenset[str] = frozenset(get_args(SessionKind))
_FORMS = (
    "agent:<agentId>:<channel>:<accountId>:dm:<peerId>[:thread:<threadId>], "
    "agent:<agentId>:<channel>:<accountId>:group:<groupId>[:thread:<threadId>], "
    "agent:<agentId>:sub:<depth>:<spawnId>:<parentKey>, "
    "agent:<agentId>:cron:<jobId> or agent:<agentId>:heartbeat"
)
_ESCAPE = re.compile(r"%(25|3A)")
_BAD_ESCAPE = re.compile(r"%(?!25|3A)")
_DEPTH = re.compile(r"[1-9][0-9]*")
_SHOWN_CHARS = 200


def _encode(component: str) -> str:
    return component.replace("%", "%25").replace(":", "%3A")


def _decode(token: str, name: str, fail: _Fail) -> str:
    if not token:
        raise fail(f"{name} is empty; every component needs at least one character")
    bad = _BAD_ESCAPE.search(token)
    if bad is not None:
        found = token[bad.start() : bad.start() + 3]
        raise fail(
            f"{name} {token!r} contains {found!r}, which is not an escape; write '%' as "
            "%25 and ':' as %3A (upper case)"
        )
    return _ESCAPE.sub(lambda m: "%" if m.group(1) == "25" else ":", token)


def _check_component(value: object, name: str) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"session key {name} must be a str, got {type(value).__name__} {value!r}; "
            "convert platform ids with str()"
        )
    if not value:
        raise ValueError(
            f"session key {name} is empty; every component needs at least one character"
        )


class _Fail:
    """Builds the ValueError for one string being parsed, naming the nested key that broke."""

    def __init__(self, whole: str) -> None:
        self.whole = whole
        self.tokens = whole.split(":")
        self.offset = 0  # token index where the key being read starts (0: the whole string)

    def __call__(self, what: str) -> ValueError:
        where = ""
        if self.offset:
            where = f" (in the nested key {_shown(':'.join(self.tokens[self.offset :]))})"
        return ValueError(f"malformed session key {_shown(self.whole)}{where}: {what}")


def _shown(s: str) -> str:
    if len(s) <= _SHOWN_CHARS:
        return repr(s)
    return repr(s[:_SHOWN_CHARS]) + f"... ({len(s)} chars)"


@dataclass(frozen=True, slots=True, repr=False)
class SessionKey:
    """One session: a DM, a group (optionally a thread in either), a sub-agent, cron or heartbeat.

    Build keys with the constructors (`dm`, `group`, `sub`, `cron`, `heartbeat`, `for_chat`)
    or `parse`; `str(key)` gives the stored form. Fields that do not apply to a kind are None:
    `channel`, `account`, `chat_id` (peer id or group id) and `thread_id` for dm/group keys,
    `spawn_id` and `parent` for sub keys, `job_id` for cron keys. Invalid combinations raise
    ValueError (TypeError for a component that is not a str).
    """

    agent: str
    kind: SessionKind
    channel: str | None = None
    account: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None
    spawn_id: str | None = None
    job_id: str | None = None
    parent: SessionKey | None = None

    def __post_init__(self) -> None:
        _check_component(self.agent, "agent")
        if self.kind not in _KINDS:
            raise ValueError(
                f"session key kind {self.kind!r} is unknown; use one of {sorted(_KINDS)}"
            )
        present: set[str] = {
            name
            for name in ("channel", "account", "chat_id", "thread_id", "spawn_id", "job_id")
            if getattr(self, name) is not None
        }
        if self.parent is not None:
            present.add("parent")
        required: set[str]
        allowed: set[str]
        if self.kind in ("dm", "group"):
            required = {"channel", "account", "chat_id"}
            allowed = required | {"thread_id"}
        elif self.kind == "sub":
            required = allowed = {"spawn_id", "parent"}
        elif self.kind == "cron":
            required = allowed = {"job_id"}
        else:
            required = allowed = set()
        missing = required - present
        if missing:
            raise ValueError(f"a {self.kind} session key needs {', '.join(sorted(missing))}")
        extra = present - allowed
        if extra:
            raise ValueError(
                f"a {self.kind} session key cannot have {', '.join(sorted(extra))}; "
                f"only {', '.join(sorted(allowed)) or 'the agent'}"
            )
        for name in sorted(present - {"parent"}):
            _check_component(getattr(self, name), name)
        if self.channel in RESERVED_CHANNELS:
            raise ValueError(
                f"channel name {self.channel!r} is reserved for {self.channel} keys; "
                "rename the channel"
            )
        if self.parent is not None:
            if not isinstance(self.parent, SessionKey):
                raise TypeError(
                    f"session key parent must be a SessionKey, got {type(self.parent).__name__}"
                )
            if self.parent.agent != self.agent:
                raise ValueError(
                    f"a sub-agent key's agent {self.agent!r} must match its parent's "
                    f"agent {self.parent.agent!r}"
                )
            if self.parent.depth + 1 > MAX_DEPTH:
                raise ValueError(
                    f"sub-agent depth {self.parent.depth + 1} exceeds the limit of {MAX_DEPTH}"
                )

    # Constructors -----------------------------------------------------------------------

    @classmethod
    def dm(
        cls, agent: str, channel: str, account: str, peer: str, thread: str | None = None
    ) -> SessionKey:
        """A direct conversation with `peer` on `channel` as bot account `account`."""
        return cls(agent, "dm", channel, account, peer, thread)

    @classmethod
    def group(
        cls, agent: str, channel: str, account: str, group: str, thread: str | None = None
    ) -> SessionKey:
        """A group chat (a platform's channel, group or room), optionally one thread of it."""
        return cls(agent, "group", channel, account, group, thread)

    @classmethod
    def for_chat(cls, agent: str, chat: ChatRef) -> SessionKey:
        """The session of a platform chat as the channels report it (thread included)."""
        return cls(agent, chat.kind, chat.channel, chat.account, chat.chat_id, chat.thread_id)

    @classmethod
    def sub(cls, parent: SessionKey, spawn_id: str) -> SessionKey:
        """A sub-agent spawned from `parent`, one level deeper, for the same agent."""
        return cls(parent.agent, "sub", spawn_id=spawn_id, parent=parent)

    @classmethod
    def cron(cls, agent: str, job_id: str) -> SessionKey:
        """The isolated session of one cron job's runs."""
        return cls(agent, "cron", job_id=job_id)

    @classmethod
    def heartbeat(cls, agent: str) -> SessionKey:
        """The agent's heartbeat session."""
        return cls(agent, "heartbeat")

    # Derived views ----------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """0 for chat, cron and heartbeat keys; n for a sub-agent n levels below its root."""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def is_group(self) -> bool:
        return self.kind == "group"

    @property
    def root(self) -> SessionKey:
        """The top-most non-sub ancestor (the key itself unless it is a sub-agent key)."""
        key = self
        while key.parent is not None:
            key = key.parent
        return key

    @property
    def chat_key(self) -> SessionKey:
        """The key with its thread part removed (the key itself when it has none)."""
        if self.thread_id is None:
            return self
        return SessionKey(self.agent, self.kind, self.channel, self.account, self.chat_id)

    # Text form --------------------------------------------------------------------------

    def __str__(self) -> str:
        head = f"agent:{_encode(self.agent)}"
        if self.kind == "heartbeat":
            return f"{head}:heartbeat"
        if self.kind == "cron":
            return f"{head}:cron:{_encode(self.job_id or '')}"
        if self.kind == "sub":
            return f"{head}:sub:{self.depth}:{_encode(self.spawn_id or '')}:{self.parent}"
        chat = (
            f"{head}:{_encode(self.channel or '')}:{_encode(self.account or '')}"
            f":{self.kind}:{_encode(self.chat_id or '')}"
        )
        if self.thread_id is None:
            return chat
        return f"{chat}:thread:{_encode(self.thread_id)}"

    def __repr__(self) -> str:
        return f"SessionKey.parse({str(self)!r})"

    @classmethod
    def parse(cls, s: str) -> SessionKey:
        """Read a key written by `str(key)`; ValueError says what is wrong and where."""
        if not isinstance(s, str):
            raise TypeError(f"a session key must be a str, got {type(s).__name__}")
        if len(s) > MAX_KEY_CHARS:
            raise ValueError(
                f"malformed session key {_shown(s)}: it is {len(s)} characters long, over the "
                f"limit of {MAX_KEY_CHARS}; keys are written by Perch, so this one is not Perch's"
            )
        fail = _Fail(s)
        tokens = fail.tokens
        layers: list[tuple[int, str, int, str]] = []  # (offset, agent, depth, spawn_id)
        pos = 0
        while True:
            fail.offset = pos
            head = tokens[pos : pos + 6]  # a bounded look: slicing the rest would be quadratic
            if head[0] != "agent":
                raise fail(f"it must start with 'agent:'; expected {_FORMS}")
            if len(head) < 3:
                raise fail(f"it ends before saying which kind of key it is; expected {_FORMS}")
            agent = _decode(head[1], "<agentId>", fail)
            if head[2] != "sub":
                head = tokens[pos:]
                break
            if len(layers) >= MAX_DEPTH:
                raise fail(f"the sub-agent nesting exceeds the limit of {MAX_DEPTH}")
            if len(head) < 6:
                raise fail("a sub-agent key needs <depth>:<spawnId>:<parentKey> after 'sub'")
            if _DEPTH.fullmatch(head[3]) is None:
                raise fail(
                    "the sub-agent <depth> must be a whole number >= 1 with no leading zeros, "
                    f"got {head[3]!r}"
                )
            if len(head[3]) > len(str(MAX_DEPTH)) or int(head[3]) > MAX_DEPTH:
                raise fail(f"the sub-agent depth exceeds the limit of {MAX_DEPTH}")
            layers.append((pos, agent, int(head[3]), _decode(head[4], "<spawnId>", fail)))
            pos += 5
        key = cls._parse_leaf(agent, head, fail)
        for offset, agent, depth, spawn_id in reversed(layers):
            fail.offset = offset
            if agent != key.agent:
                raise fail(
                    f"the sub-agent key's agent {agent!r} differs from its parent's "
                    f"agent {key.agent!r}"
                )
            if depth != key.depth + 1:
                raise fail(
                    f"the sub-agent depth {depth} does not match its parent's depth "
                    f"{key.depth} (expected {key.depth + 1})"
                )
            key = cls.sub(key, spawn_id)
        return key

    @classmethod
    def _parse_leaf(cls, agent: str, head: list[str], fail: _Fail) -> SessionKey:
        """A non-sub key from its tokens (`head[0:2]` are 'agent' and the agent id)."""
        form = head[2]
        if form == "heartbeat":
            if len(head) != 3:
                raise fail(
                    f"a heartbeat key ends after 'heartbeat', got extra {':'.join(head[3:])!r}"
                )
            return cls.heartbeat(agent)
        if form == "cron":
            if len(head) != 4:
                raise fail(
                    "a cron key is exactly agent:<agentId>:cron:<jobId> (got "
                    f"{len(head) - 3} components after 'cron'; escape ':' as %3A)"
                )
            return cls.cron(agent, _decode(head[3], "<jobId>", fail))
        channel = _decode(form, "<channel>", fail)
        if len(head) < 6:
            raise fail(
                f"a chat key needs <channel>:<accountId>:dm|group:<chatId>; expected {_FORMS}"
            )
        account = _decode(head[3], "<accountId>", fail)
        kind = head[4]
        if kind not in ("dm", "group"):
            raise fail(f"expected 'dm' or 'group' after the <accountId>, got {kind!r}")
        chat_name = "<peerId>" if kind == "dm" else "<groupId>"
        chat_id = _decode(head[5], chat_name, fail)
        thread: str | None = None
        if len(head) > 6:
            if len(head) != 8 or head[6] != "thread":
                raise fail(
                    f"after the {chat_name} only ':thread:<threadId>' may follow, got "
                    f"{':'.join(head[6:])!r} (escape ':' inside ids as %3A)"
                )
            thread = _decode(head[7], "<threadId>", fail)
        if kind == "dm":
            return cls.dm(agent, channel, account, chat_id, thread)
        return cls.group(agent, channel, account, chat_id, thread)
