"""The person rule (`bot/kernel/people.py`), pure: whoever is not the channel's one owner reaches
only their own chat, whatever the keys and ids (hypothesis); cron runs act for their maker."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.kernel.people import NOBODY, OWNER, People, person_of, private_entries
from bot.kernel.sessions import SessionKey
from bot.recall.visibility import visible_scopes
from channels.base import ChatRef
from channels.options import ChannelPolicy

IDS = st.text(st.sampled_from("abc0123:%*"), min_size=1, max_size=4)
CHANNELS = st.sampled_from(["telegram", "slack"])
KINDS = st.sampled_from(["dm", "group"])
USER_IDS = st.text(st.sampled_from("abc0123:%+"), min_size=1, max_size=4)  # never "*"


@given(CHANNELS, KINDS, IDS, st.one_of(st.none(), IDS), IDS, CHANNELS, KINDS, IDS)
def test_only_the_owner_reaches_another_chat(
    channel: str,
    kind: str,
    chat_id: str,
    thread: str | None,
    owner: str,
    to_channel: str,
    to_kind: str,
    to_id: str,
) -> None:
    key = SessionKey("main", kind, channel, "bot", chat_id, thread)  # type: ignore[arg-type]
    person = person_of(key, {channel: (owner,)})
    target = ChatRef(to_channel, "bot", to_kind, to_id)  # type: ignore[arg-type]
    same = (to_channel, to_kind, to_id) == (channel, kind, chat_id)
    assert person.is_owner == (kind == "dm" and chat_id == owner)
    assert person.may_reach(target) == (person.is_owner or same)
    assert private_entries(person) == (() if person.is_owner else ("MEMORY.md", "memory"))
    sub = SessionKey.sub(key, "s1")
    assert person_of(sub, {channel: (owner,)}) == person  # a sub-agent works for its chat


@given(st.lists(USER_IDS, min_size=1, max_size=5, unique=True), st.one_of(st.none(), USER_IDS))
def test_the_owner_is_one_id(allow_from: list[str], explicit: str | None) -> None:
    policy = ChannelPolicy(allow_from=["*", *allow_from], owner=explicit)
    assert policy.owner_ids() == ((explicit,) if explicit else (allow_from[0],))


async def test_a_cron_run_acts_for_whoever_made_its_job() -> None:
    makers = {
        "by-43": "agent:main:telegram:bot:dm:43",
        "by-cli": "cli",
        "by-old-cli": "",
        "by-a-run": "agent:main:cron:by-43",
    }

    async def creator_of(job_id: str) -> str | None:
        return makers.get(job_id)

    people = People({"telegram": ("42",)}, creator_of)
    someone = await people.person("agent:main:cron:by-43")
    assert not someone.is_owner and someone.chat is not None and someone.chat.chat_id == "43"
    assert await people.person("agent:main:cron:by-a-run") == someone
    assert await people.person("agent:main:cron:by-cli") == OWNER
    assert await people.person("agent:main:cron:by-old-cli") == OWNER
    assert await people.creator("cli") == OWNER
    assert await people.person("agent:main:cron:gone") == NOBODY
    assert await people.person("agent:main:heartbeat") == OWNER
    assert await people.person("not a key") == NOBODY


async def test_a_dm_that_is_a_chat_of_its_own_knows_its_owner_by_the_sender() -> None:
    """Slack's and Discord's DMs have a chat id of their own (D100), not the person's id."""
    people = People({"slack": ("UALICE",)})
    key = "agent:main:slack:T1:dm:D100"
    assert (await people.person(key, "UALICE")).is_owner
    assert not (await people.person(key, "UBOB")).is_owner
    group = "agent:main:slack:T1:group:C200"
    assert not (await people.person(group, "UALICE")).is_owner  # a group is never the owner's
    assert not (await People({"slack": ("UALICE",)}).person(key)).is_owner  # nobody seen yet
    # Once the owner wrote there, work without a sender (the compaction's memory flush, a
    # tool call) acts for them too; Bob's DM, and Bob in it, stay his.
    assert (await people.person(key)).is_owner
    assert (await people.person(key + ":thread:t9")).is_owner
    bob = "agent:main:slack:T1:dm:D101"
    assert not (await people.person(bob, "UBOB")).is_owner
    assert not (await people.person(bob)).is_owner
    assert not (await people.person(group)).is_owner


def test_the_owner_in_a_dm_channel_of_its_own_recalls_the_memory_notes() -> None:
    key = SessionKey.parse("agent:main:slack:T1:dm:D100")
    owners = {"slack": ("UALICE",)}
    assert "owner" in visible_scopes(key, owners, "UALICE")
    assert "owner" not in visible_scopes(key, owners, "UBOB")
    assert "owner" not in visible_scopes(key, owners)
    group = SessionKey.parse("agent:main:slack:T1:group:C200")
    assert "owner" not in visible_scopes(group, owners, "UALICE")
