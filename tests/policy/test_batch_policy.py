"""A batch is judged action by action: policy's deny rules, allow rules and tiers hold for each item
exactly as they would for the same action submitted alone, so batching never lowers the bar.

Over HTTP under a policy file: a denied item is written already rejected by policy (it never reaches
a person and never runs), an allowed one already approved; when no item is left to ask about the
batch is decided with no card; the batch asks with the highest tier among the items still asking;
an item whose tier needs what a batch cannot give (a quorum, typed confirmation) is a 400 naming it.
"""

from __future__ import annotations

from typing import Any

import pytest

from signoff._steps import arun
from signoff.client import AsyncSignoffClient
from signoff.langgraph_hitl import submit_actions
from tests.approvals.batch_steps import approve_selected
from tests.support.app import App, approval_body
from tests.support.waits import until

AGENT = "batch-agent-secret-1"
TOKENS = f"batcher:{AGENT}:agent"
POLICY = """\
default_tier: high
tiers:
  high:
    approvers: [U1]
    timeout: {after: 1h, outcome: reject}
  critical:
    approvers: [U1, U2, U3]
    quorum: 2
rules:
  - name: never-drop-tables
    tool: drop_table
    effect: deny
  - name: reads-are-fine
    tool: read_file
    effect: allow
  - name: status-posts-are-medium
    tool: post_status
    tier: medium
  - name: deploys-are-critical
    tool: deploy
    tier: critical
"""


pytestmark = pytest.mark.policy(POLICY, token=AGENT, SIGNOFF_API_TOKENS=TOKENS)


def batch(*names: str) -> dict[str, Any]:
    items = [{"name": n, "params": {"target": f"t{i}"}} for i, n in enumerate(names)]
    made = approval_body(items=items, summary=f"{len(names)} actions", approvers=[])
    for field in ("risk", "action", "preview"):
        del made[field]
    return made


async def decided(app: App, request_id: str, status: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        _, body = await app.api("GET", f"/api/v1/approvals/{request_id}")
        return dict(body) if body["status"] == status else None

    return await until(reached, f"{request_id} to become {status}")


async def post(app: App, made: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return await app.api("POST", "/api/v1/approvals", json=made, headers={"Authorization": f"Bearer {AGENT}"})


async def test_a_denied_action_in_a_batch_is_rejected_by_policy_and_never_offered(papp: App) -> None:
    status, made = await post(papp, batch("send_email", "drop_table"))
    assert status == 201 and made["status"] == "pending", made
    email, drop = made["items"]
    assert email["outcome"] is None
    assert (drop["outcome"], drop["via"]) == ("rejected", "policy"), drop
    assert "never-drop-tables" in drop["comment"]
    # The person approves everything the card offers: the denied action stays rejected.
    await papp.slack.wait_for("chat.postMessage")
    await approve_selected(papp, made["id"], [0, 1])
    done = await decided(papp, made["id"], "approved")
    assert [i["outcome"] for i in done["decision"]["items"]] == ["approved", "rejected"]
    assert done["decision"]["items"][1]["via"] == "policy"


async def test_a_batch_policy_decides_whole_is_written_decided_with_no_card(papp: App) -> None:
    status, made = await post(papp, batch("read_file", "drop_table"))
    assert status == 201, made
    assert made["status"] == "approved", made
    items = made["decision"]["items"]
    assert [(i["outcome"], i["via"]) for i in items] == [("approved", "policy"), ("rejected", "policy")]
    status, denied = await post(papp, batch("drop_table", "drop_table"))
    assert status == 201 and denied["status"] == "rejected", denied
    assert papp.slack.calls_to("chat.postMessage") == []


async def test_a_batch_asks_with_the_highest_tier_among_its_asking_actions(papp: App) -> None:
    _, made = await post(papp, batch("send_email", "post_status", "read_file"))
    assert (made["status"], made["risk"]) == ("pending", "high"), made
    assert made["approvers"] == ["U1"]
    assert [(i["outcome"], i["via"]) for i in made["items"]] == [(None, None), ("approved", "policy"),
                                                                 ("approved", "policy")]
    # The high tier's timeout (reject after 1h) holds for the batch.
    assert made["timing"]["timeout"]["outcome"] == "reject", made["timing"]


async def test_an_action_whose_tier_a_batch_cannot_meet_is_refused_by_name(papp: App) -> None:
    status, body = await post(papp, batch("send_email", "deploy"))
    assert status == 400 and body["error"]["code"] == "not_batchable", body
    message = body["error"]["message"]
    assert "deploy" in message and "2" in message and "own" in message, message
    _, listed = await papp.api("GET", "/api/v1/approvals")
    assert listed["items"] == []


async def test_langchains_middleware_asks_one_by_one_when_policy_refuses_the_batch(papp: App) -> None:
    # HumanInTheLoopMiddleware interrupts with both calls; policy puts deploy at a tier a batch cannot
    # meet, so the adapter submits each action as its own request instead of failing the turn.
    actions = [{"name": n, "args": {"target": "prod"}, "allowed": ["approve", "edit", "reject"]}
               for n in ("send_email", "deploy")]
    async with AsyncSignoffClient(papp.url, AGENT) as client:
        ids = await arun(submit_actions("thread-1:", actions, {"channel": "CAPPROVALS"}), {"client": client})
    assert len(ids) == 2
    deploy = (await papp.api("GET", f"/api/v1/approvals/{ids[1]}"))[1]
    assert (deploy["action"]["name"], deploy["risk"], deploy["quorum"]) == ("deploy", "critical", 2)
