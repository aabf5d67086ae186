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


def visible_scopes(key: SessionKey, owners: Owners) -> tuple[str, ...]:
    """The scopes a turn of session `key` may recall from."""
    root = key.root
    if root.kind not in ("dm", "group"):
        return (PUBLIC,)
    own = _chat_scope(root)
    return (PUBLIC, own, OWNER) if is_owner_dm(key, owners) else (PUBLIC, own)


def describe(scope: str) -> str:
    """A scope as people read it: `owner`, `public`, `DM 4242 on telegram`, ..."""
    try:
        key = SessionKey.parse(scope)
    except ValueError:
        return scope
    return f"{'DM' if key.kind == 'dm' else 'group'} {key.chat_id} on {key.channel}"
