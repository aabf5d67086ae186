"""`perch chat` and `perch send`: one turn through the daemon, one message to a chat.

`turn_reply` is what `perch chat` prints for a finished turn, from the daemon or from a turn
run in the CLI's own process (`control_local.py`), so both read the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.config.schema import Config
from bot.kernel.sessions import SessionKey
from bot.operator.reply import OpContext, Reply

if TYPE_CHECKING:
    from bot.kernel.turn_outcome import TurnOutcome

from bot.operator.ops_agents import CLI_CHAT, agent_problem, chat_session


def default_chat_key(config: Config) -> SessionKey:
    """The session `perch chat` uses unless given `--session`."""
    return SessionKey.for_chat(config.agent.id, CLI_CHAT)


def turn_reply(outcome: TurnOutcome) -> Reply:
    """What `perch chat` prints for a finished turn: the cleaned reply, or why there is none."""
    from bot.kernel.delivery import clean_reply  # the turn machinery only when a turn ran
    from bot.kernel.turn_outcome import empty_answer

    result = outcome.result
    if outcome.blocked:
        return Reply(1, err="perch chat: the input guard blocked that message\n")
    if result is None:
        return Reply(1, err="perch chat: the turn did not run; see the daemon's log\n")
    if result.status == "cancelled":
        return Reply(1, err="perch chat: the turn was stopped\n")
    if result.status == "error":
        return Reply(1, err=f"perch chat: the model call failed: {result.error}\n")
    text = clean_reply(result.text)  # the delivery path's cleaning and NO_REPLY rules
    if text.strip():
        return Reply(0, text.strip() + "\n")
    if empty_answer(result):  # nothing on stdout either way; say which silence it was
        return Reply(0, err="perch chat: the model sent back an empty answer\n")
    return Reply(0)


async def op_chat(ctx: OpContext, args: dict[str, Any]) -> Reply:
    if ctx.live is None:
        return Reply(1, err="perch chat: the daemon is not running\n")
    problem = agent_problem(ctx.config, args.get("agent"), "chat")
    if problem:
        return Reply(2, err=problem)
    session = args.get("session") or (
        str(chat_session(str(args["agent"]))) if args.get("agent") else None
    )
    return await ctx.live.chat(str(args.get("text", "")), str(session) if session else None)


async def op_send(ctx: OpContext, args: dict[str, Any]) -> Reply:
    problem = agent_problem(ctx.config, args.get("agent"), "send")
    if problem:  # a send is the owner's own words: no agent's session records it
        return Reply(2, err=problem)
    if ctx.live is None:
        return Reply(
            1,
            err="perch send: Perch is not running, and only the running daemon can deliver; "
            "start it with perch run (or systemctl start perch)\n",
        )
    return await ctx.live.send(str(args.get("to", "")), str(args.get("text", "")))
