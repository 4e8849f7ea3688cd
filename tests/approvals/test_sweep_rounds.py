"""A sweep takes its due rows in rounds of `batch` (bot/approvals/timers.py: 100 on SQLite, 500 on PostgreSQL).

The replica tests (test_replicas.py) make fewer rows due than one PostgreSQL round takes; here two
sweepers with small rounds run at once on the real database, so rounds follow rounds and the two
claims meet: every request is still reminded exactly once, and its reminder posted once.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from bot.approvals.timers import BATCH, PG_BATCH, Timers, batch_for
from tests.support.outbox import settle
from tests.fakes.clock import FakeClock
from tests.support.app import App


N = 23


async def test_two_sweepers_in_small_rounds_remind_each_request_once(tapp: App, clock: FakeClock) -> None:
    app = tapp
    assert app.signoff is not None and app.signoff.timers is not None
    assert app.signoff.timers.batch == batch_for(app.signoff.store.dialect) in (BATCH, PG_BATCH)
    ids = []
    for n in range(N):
        req = await app.submit(summary=f"Request {n}", reminders="10m", escalation=False, timeout=False)
        ids.append(req["id"])
    cards = {request_id: (await app.card(request_id)).ts for request_id in ids}
    await settle(app)
    posted = len(app.slack.calls_to("chat.postMessage"))
    clock.advance(minutes=10)  # every reminder due at once

    a, b = (Timers(app.signoff.service, clock, batch=4) for _ in range(2))
    first, second = await asyncio.gather(a.sweep(), b.sweep())
    assert first.reminded + second.reminded == N
    assert first.rounds + second.rounds >= N // 4 + 2  # rounds of 4, then an empty one each
    again = await a.sweep()
    assert (again.reminded, again.rounds) == (0, 1)  # nothing is due twice

    await settle(app)
    reminders = app.slack.calls_to("chat.postMessage")[posted:]
    assert Counter(c.args["thread_ts"] for c in reminders) == Counter(cards.values())
    for request_id in ids:
        audit = [e.type for e in await app.signoff.store.audit_events(request_id)]
        assert audit.count("reminded") == 1
