"""A pending submit over HTTP (one statement on PostgreSQL: storage/postgres/writes.py) writes everything the
card and App Home rely on: the request, its audit row, its card, the App Home index of its approvers
(direct ones and a user group's members, a person named twice indexed once) and a Home refresh for
exactly those approvers who have opened App Home."""

from __future__ import annotations

import sqlalchemy as sa

from bot.sandbox import SlackEmulator
from storage.schema import request_people
from tests.support.app import App, approval_body

APPROVALS = "/api/v1/approvals"


async def test_a_pending_submit_indexes_its_people_once_and_refreshes_open_homes(app: App,
                                                                                slack: SlackEmulator) -> None:
    assert app.signoff is not None
    store = app.signoff.store
    slack.add_usergroup("SOPS", ["U1", "U3"])  # U1 is named directly too
    await app.slack_client.event({"type": "app_home_opened", "user": "U3", "channel": "D3", "tab": "home"})
    await slack.wait_for("views.publish")  # U3's Home: U3 has opened App Home from now on
    status, body = await app.api("POST", APPROVALS, json=approval_body(approvers=["U1", "SOPS", "U2"]))
    assert status == 201, body
    request_id = body["id"]
    # Committed with the 201: the card and U3's Home refresh, nobody else's (U1 and U2 never opened it).
    items = await store.outbox_items(request_id)
    assert [i.kind for i in items] == ["slack.post_card"]
    homes = [i for i in await store.outbox_items() if request_id in i.dedupe_key and i.request_id is None]
    assert [(i.kind, i.payload) for i in homes] == [("slack.publish_home", {"user": "U3"})]
    async with store.engine.connect() as conn:
        people = (await conn.execute(sa.select(request_people.c.user_id, request_people.c.role).where(
            request_people.c.request_id == request_id).order_by(request_people.c.user_id))).all()
    assert [tuple(p) for p in people] == [("U1", "approver"), ("U2", "approver"), ("U3", "approver")]
    assert [e.type for e in await store.audit_events(request_id)][:1] == ["created"]
    # U3's Home is republished with the request in it, and the card is posted.
    published = await slack.wait_for("views.publish", count=2)
    assert published[-1].args["user_id"] == "U3" and body["summary"] in str(published[-1].args["view"])
    await app.card(request_id)
