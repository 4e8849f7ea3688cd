"""Audit chain anchors (issue 37): whoever can write to the database can rewrite the audit log from some row
on and hash it all again into a chain `signoff audit verify` accepts. The server therefore signs the chain's
head (position, hash) with the decision key every SIGNOFF_AUDIT_ANCHOR_SECONDS, publishes it (GET
/api/v1/audit/head, the weekly digest), and `signoff audit verify --anchor FILE_OR_URL` proves the chain
still passes through a saved anchor: a rewrite or a truncation before it is named; an altered anchor is
refused."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from slack_sdk.models.blocks import Block

from bot.domain.audit_chain import GENESIS, Anchor, ChainRow, link
from bot.sandbox import SlackEmulator
from storage.schema import audit_events as ae, audit_head
from storage.sql import SqlStore
from tests.approvals.timer_steps import tick
from tests.fakes.clock import FakeClock
from tests.support.app import API_TOKEN, App, start_app
from tests.support.audit import signoff
from tests.support.outbox import finished

ANCHORING = {"SIGNOFF_SIGNING_KEY": "", "SIGNOFF_AUDIT_ANCHOR_SECONDS": "0.05", "SIGNOFF_SWEEP_SECONDS": "0.05"}

pytestmark = pytest.mark.settings(**ANCHORING)  # the `app` fixture's settings


async def decide_some(app: App, count: int) -> None:
    for _ in range(count):
        req = await app.submit(channel="C1", approvers=["U1"])
        await app.click(req["id"], "U1", user_name="alice")
    await finished(app)


async def anchored(app: App) -> dict[str, Any]:
    """GET /api/v1/audit/head once the server has anchored the head as it is now (its sweep does)."""
    for _ in range(3000):
        status, body = await app.api("GET", "/api/v1/audit/head")
        assert status == 200, body
        if body["anchor"] is not None and body["anchor"]["seq"] == body["head"]["seq"] > 0:
            return dict(body)
        await asyncio.sleep(0.01)  # test-side: waiting for the server's sweep
    raise AssertionError(f"the head was never anchored: {body}")


def db(app: App) -> str:
    assert app.signoff is not None
    return app.signoff.settings.database_url


def store_of(app: App) -> SqlStore:
    assert app.signoff is not None
    return app.signoff.store


async def rewrite_from(store: SqlStore, seq: int, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """What someone with database access does: change the row at `seq`, hash it and every later row again,
    and move the head, so that the chain checks."""
    async with store.unit() as unit:
        rows = (await unit.conn.execute(sa.select(ae).where(ae.c.seq.is_not(None)).order_by(ae.c.seq))).all()
        prev = GENESIS
        for r in rows:
            data = change(dict(r.data)) if r.seq == seq else r.data
            if r.seq >= seq:
                row = ChainRow(id=r.id, request_id=r.request_id, type=r.type, actor=r.actor, data=data, at=r.at)
                made = link(prev, row, r.seq)
                await unit.conn.execute(ae.update().where(ae.c.id == r.id).values(data=data, prev_hash=prev,
                                                                                  hash=made))
                prev = made
            else:
                prev = r.hash
        await unit.conn.execute(audit_head.update().where(audit_head.c.id == 1).values(seq=rows[-1].seq, hash=prev))


async def truncate_to(store: SqlStore, seq: int) -> None:
    """Remove every row after `seq` and move the head back to it (a cut-off tail the chain alone accepts)."""
    async with store.unit() as unit:
        last = (await unit.conn.execute(sa.select(ae.c.hash).where(ae.c.seq == seq))).one()
        await unit.conn.execute(ae.delete().where(sa.or_(ae.c.seq > seq, ae.c.seq.is_(None))))  # the whole tail
        await unit.conn.execute(audit_head.update().where(audit_head.c.id == 1).values(seq=seq, hash=last.hash))


async def test_the_head_is_anchored_published_and_a_later_chain_extends_it(app: App, tmp_path: Path) -> None:
    await decide_some(app, 3)
    head = await anchored(app)
    _, keys = await app.api("GET", "/.well-known/signoff-keys", auth=False)
    assert head["anchor"]["signature"]["kid"] == keys["keys"][0]["kid"]
    saved = tmp_path / "anchor.json"
    saved.write_text(json.dumps(head))
    await decide_some(app, 2)  # the log grows past the anchor
    code, out, err = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 0, err
    assert out.startswith("audit chain intact: ") and f"extends the anchor of {head['anchor']['at']}" in out
    code, out, err = await signoff(db(app), "audit", "verify", "--anchor", f"{app.url}/api/v1/audit/head",
                                   "--token", API_TOKEN)
    assert code == 0 and "extends the anchor" in out, err


async def test_a_rewrite_before_the_anchor_passes_the_chain_and_fails_the_anchor(app: App, tmp_path: Path) -> None:
    await decide_some(app, 3)
    saved = tmp_path / "anchor.json"
    saved.write_text(json.dumps((await anchored(app))["anchor"]))  # the anchor alone, as one saves it
    await app.signoff.sweep_job.stop()  # type: ignore[union-attr]  # nothing seals or anchors meanwhile
    async with store_of(app).engine.connect() as conn:
        decided = (await conn.execute(sa.select(ae.c.seq).where(ae.c.type == "decided", ae.c.seq.is_not(None))
                                    .order_by(ae.c.seq))).first()
    assert decided is not None
    await rewrite_from(store_of(app), decided.seq, lambda d: {**d, "outcome": "rejected"})
    code, out, _ = await signoff(db(app), "audit", "verify")
    assert code == 0 and out.startswith("audit chain intact"), out  # the chain alone cannot tell
    code, out, _ = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 1 and "BROKEN" in out and "rewritten" in out, out


async def test_a_truncation_before_the_anchor_is_named(app: App, tmp_path: Path) -> None:
    await decide_some(app, 3)
    anchor = (await anchored(app))["anchor"]
    saved = tmp_path / "anchor.json"
    saved.write_text(json.dumps(anchor))
    await app.signoff.sweep_job.stop()  # type: ignore[union-attr]
    await truncate_to(store_of(app), anchor["seq"] - 2)
    code, out, _ = await signoff(db(app), "audit", "verify")
    assert code == 0, out  # the chain alone cannot tell
    code, out, _ = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 1 and f"truncated: the chain ends at position {anchor['seq'] - 2}" in out, out


async def test_an_altered_or_unreadable_anchor_is_refused(app: App, tmp_path: Path) -> None:
    await decide_some(app, 2)
    anchor = (await anchored(app))["anchor"]
    saved = tmp_path / "anchor.json"
    saved.write_text(json.dumps({**anchor, "seq": anchor["seq"] - 1}))  # moved back, the signature kept
    code, out, _ = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 1 and out.startswith("audit anchor INVALID: the anchor's signature does not match"), out
    saved.write_text(json.dumps({"anchor": None, "head": {"seq": 0}}))
    code, _, err = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 2 and "has not anchored its audit chain yet" in err, err
    saved.write_text("{")
    code, _, err = await signoff(db(app), "audit", "verify", "--anchor", str(saved))
    assert code == 2 and "cannot read the anchor" in err, err


async def test_the_weekly_digest_carries_the_latest_anchor(db_url: str, slack: SlackEmulator) -> None:
    clock = FakeClock()  # Monday 09:00: this week's digest (of a quiet week) is due at once
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_SIGNING_KEY="", SIGNOFF_SWEEP_SECONDS="3600",
                          SIGNOFF_DIGEST_CHANNELS="C1")
    try:
        await tick(app, clock, minutes=1)
        await decide_some(app, 1)
        code, out, err = await signoff(db_url, "audit", "anchor")
        assert code == 0, err
        anchor = Anchor.from_json(json.loads(out))
        await tick(app, clock, days=7)
        [digest] = [c.args for c in slack.calls_to("chat.postMessage") if "Weekly approvals digest" in c.args["text"]]
        assert f"Audit chain anchored at position {anchor.seq}" in digest["text"] and anchor.hash in digest["text"]
        for block in digest["blocks"]:
            Block.parse(block).to_dict()  # type: ignore[union-attr]  # validates recursively
    finally:
        await app.stop()
