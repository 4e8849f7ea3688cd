"""A year of history written straight into a migrated database, fast: `bench.history`'s set-up.

`rows` requests created between 400 and 31 days ago (older than every window a hot path reads: the
App Home's decided week, the weekly statistics, the suggestions' 14 days), each as the app leaves it:
94 % approved or rejected by U1 or U2 with a button (a decision row), 5 % expired, 1 % cancelled, and
100 of them (at every size) still pending (approvers UH0..UH49, another token, half with a timer due months
ahead: pending requests time out, so they are the live working set, not history); per request
its `request_people` rows, two audit rows (created, decided) sealed into the hash chain (`audit_head`
moved to their end), and its outbox items delivered (the card, and the card's update once decided);
one grant per 1,000 requests (expired or revoked). Nothing of it is in the live working set the bench
then measures (pending requests of U1, this week's decisions), so a path that costs more at 1 M rows
than at 1 k pays for history it should not read.

SQLite: the stdlib driver's `executemany` in one transaction (SQLAlchemy's per-row type processing
would take most of the time); PostgreSQL: asyncpg's binary COPY (`copy_records_to_table`). Values are
the stored forms the app's own types write (tests/storage/test_schema.py pins them).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.engine import make_url

from bot.domain.audit_chain import GENESIS, ChainRow, link
from bot.domain.timing import Timing

CHUNK = 20_000
_DUMP = json.dumps
_PARAMS = _DUMP({"to": "customer@example.com", "subject": "Your refund", "body": "Hello,\nrefund sent."})
_APPROVERS = _DUMP(["U1", "U2"])
_TIMING = _DUMP(Timing(remind_every=timedelta(hours=1), remind_max=3).to_json())


PENDING = 100  # pending requests among the history, at every size: the live working set does not grow


def _outcome(n: int, count: int) -> str:
    if n % max(1, count // PENDING) == 7 % max(1, count // PENDING):
        return "pending"
    k = n % 100
    if k < 60:
        return "approved"
    if k < 94:
        return "rejected"
    if k < 99:
        return "expired"
    return "cancelled"


class History:
    """The rows of `count` history requests, table by table, in chunks (memory stays flat)."""

    def __init__(self, count: int, now: datetime) -> None:
        self.count = count
        self.now = now
        self.oldest = now - timedelta(days=400)
        self.span = timedelta(days=369)  # up to 31 days ago
        self.seq = 0
        self.prev = GENESIS

    def created(self, n: int) -> datetime:
        return self.oldest + self.span * (n / max(1, self.count))

    def chunks(self, sqlite: bool) -> Iterator[dict[str, list[tuple[Any, ...]]]]:
        for first in range(0, self.count, CHUNK):
            yield self._chunk(range(first, min(self.count, first + CHUNK)), sqlite)

    def _chunk(self, ns: range, sqlite: bool) -> dict[str, list[tuple[Any, ...]]]:
        t = _text if sqlite else (lambda d: d)
        out: dict[str, list[tuple[Any, ...]]] = {"requests": [], "decisions": [], "audit_events": [],
                                                 "outbox": [], "request_people": [], "grants": []}
        for n in ns:
            rid = f"apr_hist{n:020d}"
            created = self.created(n)
            outcome = _outcome(n, self.count)
            decided = created + timedelta(minutes=3 + n % 50)
            pending = outcome == "pending"
            due = self.now + timedelta(days=30 + n % 200) if pending and n % 2 else None
            who = "U1" if n % 2 else "U2"
            approvers = _DUMP([f"UH{n % 50}"]) if pending else _APPROVERS
            out["requests"].append((
                rid, "approval", outcome, 2 if not pending else 1, "send_email", _PARAMS, "Send the refund email",
                "C1", approvers, "hist-agent", "C1", f"1600000000.{n:06d}", "{}", t(created),
                t(created if pending else decided), t(due), _TIMING if due else None, t(due),
                "hist-agent", "high"))
            for user in ([f"UH{n % 50}"] if pending else ["U1", "U2"]):
                out["request_people"].append((rid, user, "approver", t(created)))
            self._audit(out, n, rid, "created", "hist-agent", {"risk": "high"}, created, t)
            out["outbox"].append((rid, "slack.post_card", f"card:{rid}", "{}", "done", 1, 0, t(created), t(created),
                                  t(created)))
            if pending:
                continue
            by = who if outcome in ("approved", "rejected") else None
            via = "button" if by else ("timeout" if outcome == "expired" else "api")
            out["decisions"].append((rid, outcome, _PARAMS, "[]", by, by and by.lower(), t(decided), via))
            self._audit(out, n, rid, "decided", by, {"outcome": outcome, "via": via}, decided, t)
            out["outbox"].append((rid, "slack.update_card", f"update:{rid}", "{}", "done", 1, 0, t(decided),
                                  t(decided), t(decided)))
            if n % 1000 == 500:
                revoked = t(decided + timedelta(days=1)) if n % 2000 == 500 else None
                out["grants"].append((f"grt_hist{n:020d}", "send_email", _DUMP({"to": f"*@c{n}.example"}),
                                      "everyone", None, who, t(decided), t(decided + timedelta(days=7)), revoked,
                                      who if revoked else None, rid))
        return out

    def _audit(self, out: dict[str, list[tuple[Any, ...]]], n: int, rid: str, kind: str, actor: str | None,
               data: dict[str, Any], at: datetime, t: Any) -> None:
        self.seq += 1
        row_id = self.seq  # ids in chain order, as the sealer gives positions to the oldest rows first
        made = link(self.prev, ChainRow(row_id, rid, kind, actor, data, at), self.seq)
        out["audit_events"].append((row_id, rid, kind, actor, _DUMP(data), t(at), self.seq, self.prev, made))
        self.prev = made


def _text(at: datetime | None) -> str | None:
    """SQLite's stored form of a time (storage/schema.UTCDateTime)."""
    return None if at is None else at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


COLUMNS = {
    "requests": ("id", "kind", "status", "version", "action_name", "params", "summary", "channel", "approvers",
                 "requested_by", "card_channel", "card_ts", "extra", "created_at", "updated_at", "next_due_at",
                 "timing", "remind_at", "owner", "risk"),
    "request_people": ("request_id", "user_id", "role", "added_at"),
    "decisions": ("request_id", "outcome", "params", "changes", "decided_by_id", "decided_by_name", "decided_at",
                  "via"),
    "audit_events": ("id", "request_id", "type", "actor", "data", "at", "seq", "prev_hash", "hash"),
    "outbox": ("request_id", "kind", "dedupe_key", "payload", "status", "attempts", "failures", "next_attempt_at",
               "created_at", "done_at"),
    "grants": ("id", "tool", "match", "scope", "scope_value", "created_by", "created_at", "expires_at",
               "revoked_at", "revoked_by", "request_id"),
}


async def seed(db_url: str, count: int, now: datetime) -> None:
    """Write `count` history requests and all they left behind into the (migrated, empty) database."""
    history = History(count, now)
    if db_url.startswith("sqlite"):
        await asyncio.to_thread(_seed_sqlite, make_url(db_url).database or "", history)
    else:
        await _seed_postgres(db_url, history)


def _seed_sqlite(path: str, history: History) -> None:
    conn = sqlite3.connect(path)
    try:
        # Set-up only: a rollback journal and no syncs (a WAL grows to the whole history and slows every
        # insert); the app opens the file in WAL mode again with its own settings.
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-262144")
        for chunk in history.chunks(sqlite=True):
            with conn:
                for table, rows in chunk.items():
                    if rows:
                        cols = COLUMNS[table]
                        conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                                         f"({', '.join('?' * len(cols))})", rows)
        with conn:
            conn.execute("UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1", (history.seq, history.prev))
        conn.execute("ANALYZE")  # statistics, as an operator's ANALYZE (or PostgreSQL's autovacuum) leaves them
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()


async def _seed_postgres(db_url: str, history: History) -> None:
    import asyncpg

    url = make_url(db_url)
    conn = await asyncpg.connect(host=url.host or "127.0.0.1", port=url.port or 5432, user=url.username,
                                 password=url.password, database=url.database)
    try:
        for chunk in history.chunks(sqlite=False):
            async with conn.transaction():
                for table, rows in chunk.items():
                    if rows:
                        await conn.copy_records_to_table(table, records=rows, columns=list(COLUMNS[table]))
        await conn.execute("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1", history.seq, history.prev)
        await conn.execute("SELECT setval(pg_get_serial_sequence('audit_events', 'id'), $1)", max(1, history.seq))
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()
