"""The dashboard's pages: what each GET shows, read from the running daemon and the store.

Overview (channels, model, today's spend, runs in flight on every instance, MCP servers,
skills, the last problems), Sessions and one session's conversation, Pairing, Approvals (the
audit of approvals for risky tools), Cron, Usage
(drawn from the `usage` control operation, as `perch usage --json` prints it) and Logs, with
`/logs/stream` feeding new log lines as server-sent events. Nothing here changes anything:
changes are `actions.py`'s.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from bot.cluster.instances import LIVE_WITHIN
from bot.config.models import fallbacks
from bot.cron.jobs import CronJobs, describe_target
from bot.cron.schedule import format_time
from bot.kernel.budget import day_start
from bot.operator.ops_cron import job_state
from bot.store.rows import UsageDay
from bot.web.board import BOARD, Board, render
from bot.web.chart import cost_label, stacked_days, tokens_label
from bot.web.views import (
    ago,
    conversation,
    instance_line,
    runs_in_flight,
    session_line,
    when,
)

SESSIONS_SHOWN = 200
MESSAGES_SHOWN = 300
LOG_LINES_SHOWN = 300
KEEP_ALIVE_S = 15.0


async def _runs(board: Board) -> tuple[list[Any], list[Any]]:
    now = time.time()
    instances = await board.store.instances(now - LIVE_WITHIN)
    lanes = board.live.status().get("lanes", {})
    runs = runs_in_flight(lanes, instances, board.instance_id)
    return runs, [instance_line(i, board.instance_id, now) for i in instances]


async def overview(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    config = board.config
    status = board.live.status()
    runs, instances = await _runs(board)
    spent = (await board.store.usage_since(day_start())).cost_usd
    limit = config.agent.budget.daily_usd
    context = {
        "status": status,
        "started": when(status.get("started_at")),
        "model": status.get("model", config.agent.model),
        "fallbacks": fallbacks(config),
        "spent": spent,
        "limit": limit,
        "share": min(spent / limit, 1.0) if limit else 0.0,
        "budget_line": board.live.budget_line(spent).strip(),
        "runs": runs,
        "instances": instances,
        "shared": board.store.shared,
        "mcp": status.get("mcp", {}),
        "skills": board.skills.skills(),
        "problems": [(p.level, p.text) for p in board.tail.problems(8)],
    }
    return render(request, "overview.html", context)


async def sessions(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    rows = await board.store.list_sessions(SESSIONS_SHOWN)
    counts = await asyncio.gather(*(board.store.count_messages(r.id) for r in rows))
    runs, _ = await _runs(board)
    running = {run.session for run in runs}
    lines = [session_line(r, n, r.key in running) for r, n in zip(rows, counts, strict=True)]
    return render(request, "sessions.html", {"sessions": lines, "now": time.time(), "ago": ago})


async def session_view(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    key = request.query.get("key", "")
    row = await board.store.find_session(key) if key else None
    if row is None:
        context = {"status": 404, "why": "No such conversation (archived, or a mistyped key)."}
        return render(request, "refused.html", context, status=404)
    messages, total = await board.store.recent_messages(row.id, MESSAGES_SHOWN)
    runs, _ = await _runs(board)
    context = {
        "row": row,
        "line": session_line(row, total, any(run.session == key for run in runs)),
        "entries": conversation(messages),
        "shown": len(messages),
        "total": total,
        "runs": [run for run in runs if run.session == key],
    }
    return render(request, "session.html", context)


async def pairing(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    now = time.time()
    pending = [
        (r, max(int((r.expires_at - now) / 60), 0)) for r in await board.store.pairing_requests()
    ]
    approved = [(c, s, when(at)) for c, s, at in await board.store.approved_senders()]
    return render(request, "pairing.html", {"pending": pending, "approved": approved})


async def approvals(request: web.Request) -> web.StreamResponse:
    """The approvals audit: requests for risky tools, newest first, as `perch approvals`."""
    board = request.app[BOARD]
    rows = [(r, when(r.created_at), when(r.decided_at)) for r in await board.store.approvals(100)]
    return render(request, "approvals.html", {"rows": rows})


async def cron(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    book = CronJobs(board.store)
    jobs = []
    for job in await book.all():
        last = await book.runs(job.id, 1)
        next_run = job.next_run_at if job.enabled else None
        jobs.append(
            {
                "job": job,
                "state": job_state(job),
                "next": format_time(next_run, job.schedule.tz) if next_run else "-",
                "to": describe_target(job.deliver_to),
                "last": last[0] if last else None,
                "last_at": format_time(last[0].started_at, job.schedule.tz) if last else "",
            }
        )
    return render(request, "cron.html", {"jobs": jobs, "tz": board.config.agent.timezone})


async def usage(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    reply = await board.op("usage", {"days": 30, "json": True})
    data: dict[str, Any] = json.loads(reply.out) if reply.code == 0 else {}
    rows = [UsageDay(**row) for row in data.get("rows", [])]
    since = float(data.get("since", day_start() - 29 * 86400))
    days = [time.strftime("%Y-%m-%d", time.gmtime(since + i * 86400)) for i in range(30)]
    models: dict[str, list[float]] = {}
    for r in rows:
        totals = models.setdefault(r.model or "-", [0, 0, 0.0])
        totals[0] += r.input_tokens + r.cache_read_tokens + r.cache_write_tokens
        totals[1] += r.output_tokens
        totals[2] += r.cost_usd
    context = {
        "tokens": stacked_days(
            days,
            rows,
            lambda r: r.input_tokens + r.output_tokens + r.cache_read_tokens + r.cache_write_tokens,
            tokens_label,
        ),
        "cost": stacked_days(days, rows, lambda r: r.cost_usd, cost_label),
        "models": sorted(models.items()),
        "rows": rows[::-1],
        "first": days[0],
        "last": days[-1],
    }
    return render(request, "usage.html", context)


async def logs(request: web.Request) -> web.StreamResponse:
    board = request.app[BOARD]
    lines = board.tail.after(0, LOG_LINES_SHOWN)
    after = lines[-1].seq if lines else 0
    return render(request, "logs.html", {"lines": lines, "after": after})


async def log_stream(request: web.Request) -> web.StreamResponse:
    """New log lines as server-sent events (`id:` is the line's number, so a reconnecting
    EventSource resumes after the last one it had)."""
    board = request.app[BOARD]
    given = request.headers.get("Last-Event-ID") or request.query.get("after", "0")
    after = int(given) if given.isdigit() else 0
    if after > board.tail.last_seq:  # numbered by a daemon before a restart: send them all
        after = 0
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    try:
        while not board.closing.is_set():
            lines = await board.tail.wait_after(after, KEEP_ALIVE_S)
            if not lines:
                await response.write(b": keep-alive\n\n")
                continue
            for line in lines:
                data = json.dumps({"level": line.level, "text": line.text})
                await response.write(f"id: {line.seq}\ndata: {data}\n\n".encode())
                after = line.seq
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response
