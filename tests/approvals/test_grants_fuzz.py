"""Properties of grants (issue 33): whatever is sent to the grants API, by whichever token, no grant is
ever made and an agent token changes none; whatever signed "Approve & remember" form is submitted, a
grant appears only as the legitimate Slack path makes it (an approver of that pending request, its
approval in the same write, the scope the request allows). No 5xx, no listener crash."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sandbox.signed import checkboxes, radio, static_select
from tests.support.fuzz import FUZZ_SETTINGS, ErrorLog, in_thread
from tests.api.test_api_fuzz import json_values
from tests.support.outbox import listeners_done
from tests.support.app import App, approval_body

A, B, OPS = "tok-agent-a-1", "tok-agent-b-2", "tok-ops-admin-3"
TOKENS = f"agent-a:{A}:agent,agent-b:{B}:agent,ops:{OPS}:admin"
POLICY = "grant_admins: [U5]\nrules:\n  - name: drops-are-critical\n    tool: drop_table\n    tier: critical\n"
MAIL = {"to": "ann@example.com", "subject": "Hi"}


pytestmark = [pytest.mark.fuzz, pytest.mark.policy(POLICY, token=OPS, SIGNOFF_API_TOKENS=TOKENS)]


async def grant_rows(app: App) -> list[dict[str, Any]]:
    assert app.signoff is not None
    async with app.signoff.store.engine.connect() as conn:
        rows = (await conn.exec_driver_sql(
            "SELECT id, request_id, created_by, scope, scope_value, revoked_at, revoked_by FROM grants ORDER BY id")).all()
    return [dict(r._mapping) for r in rows]


ASKED = [0]


async def pending(app: App, token: str = A) -> dict[str, Any]:
    """A new pending request (its own subject: no grant made so far matches it), its card posted."""
    ASKED[0] += 1
    params = {**MAIL, "subject": f"Hi {ASKED[0]}"}
    body = approval_body(action={"name": "send_email", "params": params}, preview=None, approvers=["U1", "U2"])
    status, asked = await app.api("POST", "/api/v1/approvals", json=body, headers={"Authorization": f"Bearer {token}"})
    assert status == 201, asked
    await app.card(asked["id"])
    return dict(asked)


async def remembered(app: App) -> None:
    """One grant made the legitimate way, for the API examples to aim at."""
    asked = await pending(app)
    await app.click(asked["id"], "U1", action="signoff_remember")
    view = (await app.slack.wait_for("views.open"))[-1].args["view"]
    await app.slack_client.view_submission(user="U1", callback_id="signoff_remember_view",
                                           private_metadata=view["private_metadata"],
                                           values={"scope": {"scope": radio("everyone")},
                                                   "duration": {"duration": static_select("forever")}})
    await listeners_done(app)
    assert len(await grant_rows(app)) == 1


async def test_the_grants_api_never_makes_a_grant_and_agent_tokens_change_none(papp: App) -> None:
    await remembered(papp)
    [made] = await grant_rows(papp)
    loop = asyncio.get_running_loop()
    forged = {"tool": "send_email", "match": {"to": {"op": "glob", "value": "*"}}, "scope": "everyone",
              "duration": "forever", "created_by": "U1", "request_id": made["request_id"], "by": "U1"}
    bodies = st.one_of(st.none(), json_values, st.dictionaries(st.sampled_from(sorted(forged)), json_values, max_size=4),
                       st.just(forged))
    paths = st.sampled_from(["/api/v1/grants", f"/api/v1/grants/{made['id']}/revoke", f"/api/v1/grants/{made['id']}",
                             "/api/v1/grants/grt_nope/revoke", "/api/v1/grants//revoke", "/api/v1/grants/%00/revoke"])
    seen: dict[int, int] = {}

    @FUZZ_SETTINGS
    @given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]), path=paths, body=bodies,
           token=st.sampled_from([A, B, OPS]))
    def check(call: Any, method: str, path: str, body: Any, token: str) -> None:
        before = call(grant_rows(papp))
        data = None if body is None else json.dumps(body).encode()
        status, answer = call(papp.api(method, path, data=data, headers={"Authorization": f"Bearer {token}",
                                                                           "Content-Type": "application/json"}))
        seen[status] = seen.get(status, 0) + 1
        assert status < 500, (method, path, body, answer)
        after = call(grant_rows(papp))
        assert [g["id"] for g in after] == [g["id"] for g in before]  # never a new grant
        if token != OPS or status != 200 or method != "POST":
            assert after == before, (method, path, body, token)  # nothing changed
        if after != before:  # an admin's revoke: recorded as the token, whatever the body said
            assert after[0]["revoked_at"] is not None and after[0]["revoked_by"] == "api:ops"

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        assert errors.take() == []
    print(f"\ngrants API fuzz: answers by status: {dict(sorted(seen.items()))}")


async def test_signed_remember_forms_make_a_grant_only_the_legitimate_way(papp: App) -> None:
    loop = asyncio.get_running_loop()
    current: dict[str, Any] = {"request": await pending(papp), "other": await pending(papp, B)}
    made = {"count": 0}

    @FUZZ_SETTINGS
    @given(user=st.sampled_from(["U1", "U2", "U5", "U9"]), which=st.sampled_from(["request", "other", "forged"]),
           scope=st.one_of(st.sampled_from(["agent", "channel", "everyone", "run"]), st.text(max_size=8)),
           duration=st.one_of(st.sampled_from(["1h", "forever"]), st.text(max_size=5)),
           widen=st.lists(st.sampled_from(["to:domain", "subject:any", "to:any", "amount:any", "x"]), max_size=2),
           drop=st.sampled_from(["", "scope", "duration", "meta"]), junk=json_values)
    def check(call: Any, user: str, which: str, scope: str, duration: str, widen: list[str], drop: str,
              junk: Any) -> None:
        target = current.get(which) or {"id": "apr_forged", "channel": "C1"}
        meta = json.dumps({"request_id": target["id"], "version": 2, "channel": "C1"}) if drop != "meta" else \
            json.dumps(junk)
        values: dict[str, Any] = {"generalise": {"generalise": checkboxes(widen)}, "scope": {"scope": radio(scope)},
                                  "duration": {"duration": static_select(duration)}}
        values.pop(drop, None)
        before = call(grant_rows(papp))
        response = call(papp.slack_client.view_submission(user=user, callback_id="signoff_remember_view",
                                                          private_metadata=meta, values=values))
        assert response.status < 500
        call(listeners_done(papp))
        new = [g for g in call(grant_rows(papp)) if g["id"] not in {b["id"] for b in before}]
        if not new:
            return
        [grant] = new
        made["count"] += 1
        _, decided = call(papp.api("GET", f"/api/v1/approvals/{grant['request_id']}"))
        # Only an approver of that request, approving it in the same write, with a scope it allows.
        assert grant["created_by"] == user and user in ("U1", "U2"), grant
        assert decided["status"] == "approved" and decided["decision"]["decided_by"]["id"] == user
        expected = {"agent": "agent-a" if which == "request" else "agent-b", "channel": "C1", "everyone": None}
        assert grant["scope"] in expected and grant["scope_value"] == expected[grant["scope"]], grant
        current[which] = call(pending(papp, A if which == "request" else B))  # a fresh pending request to aim at

    with ErrorLog() as errors:
        await in_thread(loop, lambda call: check(call))
        assert errors.take() == []
    print(f"\nremember-form fuzz: {made['count']} grants made the legitimate way")
    assert made["count"] > 0  # the legitimate path was reached
