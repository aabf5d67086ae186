"""Who may see what the index holds: the scope of each document, the scopes of each chat.

Every document carries one scope; a chat sees the documents whose scope is among its
`visible_scopes`. The rule (pure, table-tested in tests/recall/test_recall_visibility.py):
- skills: `public`, seen everywhere;
- memory files (MEMORY.md, memory/*.md): `owner`, seen only in the owner's DMs
  (`bot/kernel/people.py` `is_owner_dm`: a DM with the channel's ONE owner id, explicit
  `channels.<name>.owner` or the first id of `allow_from`, the console's user; and
  `perch chat`'s own DM, channel `cli`). Every other allowed or paired person is someone
  else and never sees them;
- a conversation in a DM: the person's scope, the DM's session key without a thread
  (`agent:<id>:<channel>:<account>:dm:<peer>`): the same
  person is the same channel, account and peer, so every session with them (threads, and
  the sessions before a /new) shares it, and nobody else's DM and no group sees it;
- a conversation in a group: the group's scope, its key without a thread, seen
  only within that group (its threads included);
- a sub-agent's conversation: its root chat's scope (it worked for that chat);
- cron and heartbeat conversations: `owner` (they run on the owner's behalf).
A chat sees `public` and its own scope, and `owner` too when it is the owner's DM. A cron or
heartbeat turn sees only `public`: where its answer goes is decided per job (a group, the
last chat), so it recalls nothing private. The operator's own search (`perch memory search`)
sees every scope.
"""

from __future__ import annotations

from bot.kernel.people import OPERATOR_CHANNEL as OPERATOR_CHANNEL
from bot.kernel.people import Owners as Owners
from bot.kernel.people import is_owner_dm as is_owner_dm
from bot.kernel.sessions import SessionKey

PUBLIC = "public"
OWNER = "owner"


def _chat_scope(key: SessionKey) -> str:
    """The chat's key without its thread: unambiguous, as a session key is."""
    return str(key.chat_key)


def scope_of(key: SessionKey) -> str:
    """The scope a session's conversation is indexed under."""
    root = key.root
    if root.kind in ("dm", "group"):
        return _chat_scope(root)
    return OWNER  # cron, heartbeat


def visible_scopes(key: SessionKey, owners: Owners, sender: str | None = None) -> tuple[str, ...]:
    """The scopes a turn of session `key` may recall from; `sender` (who wrote the message)
    knows the owner in a DM whose chat id is not the person's id (a DM channel of its own)."""
    root = key.root
    if root.kind not in ("dm", "group"):
        return (PUBLIC,)
    own = _chat_scope(root)
    by_sender = (
        root.kind == "dm"
        and sender is not None
        and root.channel is not None
        and sender in owners.get(root.channel, ())
    )
    owner = is_owner_dm(key, owners) or by_sender
    return (PUBLIC, own, OWNER) if owner else (PUBLIC, own)


def describe(scope: str) -> str:
    """A scope as people read it: `owner`, `public`, `DM 4242 on telegram`, ..."""
    try:
        key = SessionKey.parse(scope)
    except ValueError:
        return scope
    return f"{'DM' if key.kind == 'dm' else 'group'} {key.chat_id} on {key.channel}"
