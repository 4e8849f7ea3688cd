"""The Agent API page's (docs/api.md) examples for quorum, typed confirmation, separation of duties and batches, as written."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.domain.params_hash import check_params
from tests.approvals.batch_steps import approve_selected, controls, item_state, open_item, submit
from tests.approvals.duty_steps import ephemerals_to
from bot.sandbox.signed import plain_input
from tests.support.app import App
from tests.support.docs import fenced, page, section

IDS = {"U0123ALICE": "U1", "U0456BOB": "U2", "U0789CAROL": "U3", "S0456OPS": "SOPS", "C0123ABCD": "C1"}


def api_section(title: str) -> str:
    """A section of the Agent API page (docs/api.md; it was the README's)."""
    return section(page("docs/api.md"), title)


def with_test_ids(raw: str) -> Any:
    for real, ours in IDS.items():
        raw = raw.replace(real, ours)
    return json.loads(raw)


async def test_readme_quorum_confirmation_and_duties_example(app: App) -> None:
    app.slack.add_usergroup("SOPS", ["U1", "U2", "U3"])  # carol may decide, but not approve her own
    example = fenced(api_section("Quorum, separation of duties"), "json")
    status, req = await app.api("POST", "/api/v1/approvals", json=with_test_ids(example))
    assert status == 201, req
    assert (req["quorum"], req["requester_user"], req["confirm"]) == (2, "U3", "orders_2019")

    await app.click(req["id"], "U3", user_name="carol")  # the requester
    await app.slack.wait_for("chat.postEphemeral")
    assert "separation of duties" in ephemerals_to(app, "U3")[0]
    for user, name in (("U1", "alice"), ("U2", "bob")):
        await app.click(req["id"], user, user_name=name)
        opened = await app.slack.wait_for("views.open", count=1 if user == "U1" else 2)
        await app.slack_client.view_submission(
            user=user, user_name=name, callback_id="signoff_confirm",
            private_metadata=opened[-1].args["view"]["private_metadata"],
            values={"confirm": {"typed": plain_input("orders_2019")}})
        if user == "U1":
            await app.slack.wait_for("chat.postEphemeral", count=2)  # "your approval counts: 1 of 2"
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    decision = body["decision"]
    assert body["status"] == "approved" and decision["decided_by"]["id"] == "U2"
    assert [v["id"] for v in decision["votes"]] == ["U1", "U2"]
    check_params(decision, {"table": "orders_2019"})


async def test_readme_batch_example(app: App) -> None:
    batches = api_section("Batches")
    curl = re.search(r"-d '(.*?)'", batches, re.S)
    assert curl is not None
    status, req = await app.api("POST", "/api/v1/approvals", json=with_test_ids(curl.group(1)))
    assert status == 201, req
    card = await app.card(req["id"])
    assert controls(card, 1) == ["signoff_item_pick", "signoff_item_reject", "signoff_item_respond"]
    # The decision the README shows: alice replies to the second action, then ticks the first and approves.
    shown = json.loads(fenced(batches, "json").replace("U0123ALICE", "U1"))["items"]
    view = await open_item(app, req["id"], 1, "signoff_item_respond")
    await submit(app, view, {"reason": {"value": plain_input(shown[1]["comment"])}})
    await item_state(app, req["id"], 1)
    await approve_selected(app, req["id"], [0])
    _, body = await app.api("GET", f"/api/v1/approvals/{req['id']}?wait=5")
    assert body["status"] == "approved"
    fields = ("name", "outcome", "params", "changes", "comment", "via", "decided_by")
    assert [{k: i[k] for k in fields} for i in body["decision"]["items"]] == [{k: i[k] for k in fields} for i in shown]
    check_params(body["decision"]["items"][0], {"subject": "Refund", "to": "a@example.com"})
