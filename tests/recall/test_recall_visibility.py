"""The visibility rule of recall (`bot/recall/visibility.py`), as a table: which documents a
turn of each kind of session may see, by the scope they were indexed under."""

from __future__ import annotations

import pytest

from bot.kernel.sessions import SessionKey
from bot.recall.visibility import OWNER, PUBLIC, describe, is_owner_dm, scope_of, visible_scopes

OWNERS = {"telegram": ("4242",), "slack": ("U1",)}

ANNA_DM = SessionKey.dm("main", "telegram", "default", "777")
ANNA_THREAD = SessionKey.dm("main", "telegram", "default", "777", thread="t9")
ANNA_OTHER_BOT = SessionKey.dm("main", "telegram", "second", "777")
ANNA_SLACK = SessionKey.dm("main", "slack", "default", "777")
BEN_DM = SessionKey.dm("main", "telegram", "default", "888")
OWNER_DM = SessionKey.dm("main", "telegram", "default", "4242")
OWNER_SLACK = SessionKey.dm("main", "slack", "default", "U1")
NOT_OWNER_SLACK = SessionKey.dm("main", "slack", "default", "4242")  # the id, on another channel
CLI = SessionKey.dm("main", "cli", "local", "owner")
GROUP = SessionKey.group("main", "telegram", "default", "-100")
GROUP_THREAD = SessionKey.group("main", "telegram", "default", "-100", thread="7")
OTHER_GROUP = SessionKey.group("main", "telegram", "default", "-200")
GROUP_NAMED_LIKE_A_DM = SessionKey.group("main", "telegram", "default", "777")
CRON = SessionKey.cron("main", "job1")
HEARTBEAT = SessionKey.heartbeat("main")
ANNA_CHILD = SessionKey.sub(ANNA_DM, "s1")
OWNER_CHILD = SessionKey.sub(OWNER_DM, "s2")

MEMORY_FILE, SKILL = OWNER, PUBLIC  # the scopes of a memory note and of a skill

# (the viewing session, the session the document comes from or its scope, seen?)
CASES = [
    (ANNA_DM, SKILL, True),
    (ANNA_DM, MEMORY_FILE, False),  # another person's notes never reach a DM but the owner's
    (OWNER_DM, MEMORY_FILE, True),
    (OWNER_SLACK, MEMORY_FILE, True),  # the owner's DM on each channel
    (NOT_OWNER_SLACK, MEMORY_FILE, False),
    (CLI, MEMORY_FILE, True),  # perch chat: the operator at the shell
    (GROUP, MEMORY_FILE, False),  # never in a group, the owner's notes
    (GROUP, SKILL, True),
    (ANNA_DM, ANNA_DM, True),  # an earlier session of the same DM (before /new)
    (ANNA_THREAD, ANNA_DM, True),  # the same person: threads of the DM too
    (ANNA_DM, ANNA_THREAD, True),
    (ANNA_OTHER_BOT, ANNA_DM, False),  # another bot account: another conversation
    (ANNA_SLACK, ANNA_DM, False),  # same person = same channel, account and peer
    (BEN_DM, ANNA_DM, False),  # one person's DM never in another person's
    (OWNER_DM, ANNA_DM, False),  # not even the owner's
    (GROUP, ANNA_DM, False),  # a DM never surfaces in a group
    (GROUP_NAMED_LIKE_A_DM, ANNA_DM, False),  # not even a group whose id is the peer's
    (ANNA_DM, GROUP, False),  # a group's talk stays in the group
    (GROUP_THREAD, GROUP, True),
    (GROUP, GROUP_THREAD, True),
    (OTHER_GROUP, GROUP, False),
    (ANNA_DM, ANNA_CHILD, True),  # a sub-agent worked for its chat
    (BEN_DM, ANNA_CHILD, False),
    (ANNA_CHILD, ANNA_DM, True),  # and sees what its chat sees
    (ANNA_CHILD, MEMORY_FILE, False),
    (OWNER_CHILD, MEMORY_FILE, True),
    (OWNER_DM, CRON, True),  # cron and heartbeat run for the owner
    (OWNER_DM, HEARTBEAT, True),
    (ANNA_DM, CRON, False),
    (GROUP, HEARTBEAT, False),
    (CRON, MEMORY_FILE, False),  # their answers may go anywhere: only what is public
    (HEARTBEAT, OWNER_DM, False),
    (CRON, SKILL, True),
]


@pytest.mark.parametrize(("viewer", "source", "seen"), CASES)
def test_who_sees_what(viewer: SessionKey, source: SessionKey | str, seen: bool) -> None:
    scope = source if isinstance(source, str) else scope_of(source)
    assert (scope in visible_scopes(viewer, OWNERS)) is seen


def test_every_chat_sees_skills_and_owners_are_recognised_by_channel() -> None:
    for viewer, *_ in CASES:
        assert PUBLIC in visible_scopes(viewer, OWNERS)
    assert is_owner_dm(OWNER_DM, OWNERS) and not is_owner_dm(NOT_OWNER_SLACK, OWNERS)
    assert not is_owner_dm(OWNER_DM, {})  # no owner configured: nobody's DM is the owner's


def test_scopes_name_the_chat_for_the_operator() -> None:
    assert describe(scope_of(ANNA_THREAD)) == "DM 777 on telegram"
    assert describe(scope_of(GROUP_THREAD)) == "group -100 on telegram"
    assert describe(scope_of(CRON)) == OWNER
