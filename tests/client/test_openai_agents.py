"""OpenAI Agents SDK runs gated by Signoff: policy first, one card per turn, decisions applied to the
`RunState`, edits carried to the tool, and resumed once, in any process.

The real `openai-agents` with `agents.testing.ScriptedModel` (offline), the running Signoff under a
policy file, and the Slack emulator with signed clicks.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from agents import Agent, Runner
from agents.testing import ScriptedModel
from agents.tool_context import ToolContext

from bot.sandbox import SlackEmulator
from bot.sandbox.signed import plain_input
from signoff import AsyncSignoffClient, SignoffError
from signoff.openai import Approvals
from signoff.openai_runs import UNKNOWN
from tests.approvals.batch_steps import approve_selected, item_state, open_item, submit
from tests.client.oa_agents import build, calls, done, email, function_call, outputs
from tests.client.test_langgraph import decided, submit_modal
from tests.support.app import API_TOKEN, ROOT, App, ShiftedClock, policy_app, start_app
from tests.support.policies import READS_ARE_FINE

POLICY = "rules:\n" + READS_ARE_FINE + """\
  - name: archives-are-fine
    tool: archive_*
    effect: allow
    tier: low
  - name: tables-stay
    tool: drop_*
    effect: deny
    reason: tables are dropped by people only
"""


pytestmark = pytest.mark.policy(POLICY)  # `papp`: the app under it (tests/conftest.py)


@pytest.fixture
def oa_env(papp: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """What an agent process has: where Signoff is, and (for these tests) where tools record their calls."""
    env = {"SIGNOFF_URL": papp.url, "SIGNOFF_TOKEN": API_TOKEN, "OA_CALLS": str(tmp_path / "calls.jsonl")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield {**os.environ, **env, "PYTHONPATH": str(ROOT)}


@pytest_asyncio.fixture
async def approvals(papp: App, oa_env: dict[str, str], tmp_path: Path) -> AsyncIterator[Approvals]:
    async with AsyncSignoffClient(papp.url, API_TOKEN) as client:
        yield Approvals(tmp_path / "runs", client=client, channel="C1", approvers=["U1"])


def second(approvals: Approvals, client: AsyncSignoffClient) -> Approvals:
    """Another resumer of the same runs (its own owner name), as another process would be."""
    return Approvals(approvals.store, client=client, channel="C1", approvers=["U1"])


async def started(approvals: Approvals, steps: list[Any], run_id: str) -> tuple[Any, Any, str]:
    agent, model = build(approvals, steps)
    result = await Runner.run(agent, "Do the chores")
    paused = await approvals.pause(result, run_id)
    assert paused is not None and len(paused.request_ids) == 1
    return agent, model, paused.request_ids[0]


async def run_script(*args: str, env: dict[str, str]) -> Any:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.client.oa_agents", *args, env=env,
                                                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_approved_in_slack_the_call_runs_once(papp: App, approvals: Approvals) -> None:
    agent, model, request_id = await started(approvals, [[email()], done("Sent.")], "approve-1")
    assert calls() == []  # paused before the tool
    await papp.card(request_id)
    assert len(papp.slack.calls_to("chat.postMessage")) == 1
    assert await approvals.resume(agent, "approve-1") is None  # nobody decided yet
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    result = await approvals.resume(agent, "approve-1")
    assert result is not None and result.final_output == "Sent."
    assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund"}}]
    assert outputs(model) == {"call_mail": "sent to c@example.com: Your refund"}
    assert await approvals.resume(agent, "approve-1") is None  # never again
    assert len(calls()) == 1 and len(papp.slack.calls_to("chat.postMessage")) == 1


async def test_an_edit_in_slack_is_what_the_tool_runs_with(papp: App, approvals: Approvals) -> None:
    agent, model, request_id = await started(approvals, [[email()], done()], "edit-1")
    body = await submit_modal(papp, request_id, "signoff_edit", {"p:to": {"value": plain_input("c@example.com")},
                                                                  "p:subject": {"value": plain_input("Refund: $45")}})
    assert body["decision"]["changes"] == [{"field": "subject", "from": "Your refund", "to": "Refund: $45"}]
    result = await approvals.resume(agent, "edit-1")
    assert result is not None
    assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Refund: $45"}}]
    assert outputs(model) == {"call_mail": "sent to c@example.com: Refund: $45"}


async def test_a_rejection_reaches_the_model_as_the_persons_reason(papp: App, approvals: Approvals) -> None:
    agent, model, request_id = await started(approvals, [[email()], done("Understood.")], "reject-1")
    await submit_modal(papp, request_id, "signoff_reject", {"reason": {"value": plain_input("Not on a Sunday")}})
    result = await approvals.resume(agent, "reject-1")
    assert result is not None and result.final_output == "Understood."
    assert calls() == []
    assert outputs(model) == {"call_mail": "Not on a Sunday"}


async def test_several_calls_of_one_turn_are_one_batch_card_decided_each_on_its_own(
        papp: App, approvals: Approvals) -> None:
    steps = [[email(), function_call("delete_file", {"path": "/tmp/report.txt"}, call_id="call_rm")], done()]
    agent, model, batch_id = await started(approvals, steps, "batch-1")
    await papp.card(batch_id)
    assert len(papp.slack.calls_to("chat.postMessage")) == 1
    view = await open_item(papp, batch_id, 1, "signoff_item_reject")
    await submit(papp, view, {"reason": {"value": plain_input("Keep the report")}})
    await item_state(papp, batch_id, 1)
    await approve_selected(papp, batch_id, [0])
    body = await decided(papp, batch_id)
    assert [i["outcome"] for i in body["decision"]["items"]] == ["approved", "rejected"]
    assert await approvals.resume(agent, "batch-1") is not None
    assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund"}}]
    assert outputs(model) == {"call_mail": "sent to c@example.com: Your refund", "call_rm": "Keep the report"}
    assert len(papp.slack.calls_to("chat.postMessage")) == 1


async def test_pausing_again_finds_the_turns_card(papp: App, approvals: Approvals) -> None:
    agent, _ = build(approvals, [[email()]])
    result = await Runner.run(agent, "Send it")
    first = await approvals.pause(result, "again-1")
    again = await approvals.pause(result, "again-1")
    assert first is not None and again is not None and first.request_ids == again.request_ids and again.turn == 1
    await papp.card(first.request_ids[0])
    assert len(papp.slack.calls_to("chat.postMessage")) == 1


async def test_paused_in_one_process_resumed_once_by_two_resumer_processes(papp: App, oa_env: dict[str, str], tmp_path: Path) -> None:
    runs = str(tmp_path / "runs")
    started_out = await run_script("start", runs, "proc-1", env=oa_env)
    request_id = started_out["request_id"]
    assert calls() == []
    await submit_modal(papp, request_id, "signoff_edit", {"p:to": {"value": plain_input("d@example.com")},
                                                           "p:subject": {"value": plain_input("Your refund")}})
    # Two resumer processes at once, on the same store: one resumes, the other finds it taken.
    outcomes = await asyncio.gather(*(run_script("resume", runs, "proc-1", env=oa_env) for _ in range(2)))
    [resumed] = [o for o in outcomes if o is not None]
    assert outcomes.count(None) == 1
    assert resumed == {"final": "Sent it.", "outputs": {"call_mail": "sent to d@example.com: Your refund"}}
    assert calls() == [{"tool": "send_email", "args": {"to": "d@example.com", "subject": "Your refund"}}]
    async with AsyncSignoffClient(papp.url, API_TOKEN) as client:  # finished: no process resumes it again
        again = Approvals(runs, client=client)
        assert await again.resume(build(again, [done()])[0], "proc-1") is None
    assert len(calls()) == 1


async def test_two_resumers_on_one_decision_resume_once(papp: App, approvals: Approvals) -> None:
    agent, _, request_id = await started(approvals, [[email()], done()], "twice-1")
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    async with AsyncSignoffClient(papp.url, API_TOKEN) as other_client:
        other = second(approvals, other_client)
        other_agent, _ = build(other, [done()])
        outcomes = await asyncio.gather(approvals.resume(agent, "twice-1"), other.resume(other_agent, "twice-1"))
    assert sorted(o is None for o in outcomes) == [False, True]
    assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund"}}]


async def test_policy_allowed_calls_never_interrupt(papp: App, approvals: Approvals) -> None:
    agent, model = build(approvals, [[function_call("read_file", {"path": "notes.txt"}, call_id="call_read")],
                                     done("Read it.")])
    result = await approvals.run(agent, "Read my notes", run_id="allowed-1")
    assert result.final_output == "Read it." and result.interruptions == []
    assert calls() == [{"tool": "read_file", "args": {"path": "notes.txt"}}]
    assert papp.slack.calls_to("chat.postMessage") == []  # no card
    status, listing = await papp.api("GET", "/api/v1/approvals")
    assert listing["items"] == []  # nothing asked


async def test_a_policy_denied_call_never_runs_and_the_model_reads_why(papp: App, approvals: Approvals) -> None:
    agent, model = build(approvals, [[function_call("drop_table", {"name": "users"}, call_id="call_drop")],
                                     done("Not allowed, then.")])
    result = await approvals.run(agent, "Drop the users table", run_id="denied-1")
    assert result.final_output == "Not allowed, then."
    assert calls() == []
    assert papp.slack.calls_to("chat.postMessage") == []  # no card: nobody is asked to allow it
    [said] = outputs(model).values()
    assert "tables-stay" in said and "tables are dropped by people only" in said


async def test_one_turn_runs_the_allowed_call_refuses_the_denied_one_and_asks_about_the_rest(
        papp: App, approvals: Approvals) -> None:
    steps = [[function_call("read_file", {"path": "notes.txt"}, call_id="call_read"),
              function_call("drop_table", {"name": "users"}, call_id="call_drop"), email()], done()]
    agent, model, request_id = await started(approvals, steps, "mixed-1")
    assert calls() == [{"tool": "read_file", "args": {"path": "notes.txt"}}]  # allowed: ran in the first turn
    card = await papp.api("GET", f"/api/v1/approvals/{request_id}")
    assert card[1]["action"]["name"] == "send_email"  # the card asks about the one call policy asks about
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    assert await approvals.resume(agent, "mixed-1") is not None
    assert [c["tool"] for c in calls()] == ["read_file", "send_email"]
    said = outputs(model)
    assert said["call_read"] == "contents of notes.txt" and said["call_mail"].startswith("sent to")
    assert said["call_drop"].startswith("Not run: ") and "tables are dropped by people only" in said["call_drop"]
    assert len(papp.slack.calls_to("chat.postMessage")) == 1


QUORUM_POLICY = """\
tiers:
  high:
    approvers: [U1, U2]
    quorum: 2
"""


async def test_calls_a_batch_cannot_carry_get_a_card_each(db_url: str, slack: SlackEmulator, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Policy asks two people about each call: one person's decision on a batch cannot give that
    (`not_batchable`), so each call gets its own card, and each is resumed by its own decision."""
    monkeypatch.setenv("OA_CALLS", str(tmp_path / "calls.jsonl"))
    async with policy_app(db_url, slack, tmp_path, QUORUM_POLICY) as qapp, \
            AsyncSignoffClient(qapp.url, API_TOKEN) as client:
        approvals = Approvals(tmp_path / "runs", client=client, channel="C1")
        steps = [[email(), function_call("delete_file", {"path": "/tmp/r.txt"}, call_id="call_rm")], done()]
        agent, model = build(approvals, steps)
        paused = await approvals.pause(await Runner.run(agent, "Do the chores"), "quorum-1")
        assert paused is not None and len(paused.request_ids) == 2
        again = await approvals.pause(await Runner.run(build(approvals, steps[:1])[0], "Do the chores"), "quorum-1")
        assert again is not None and again.request_ids == paused.request_ids  # found, not posted again
        mail_id, rm_id = paused.request_ids
        for person, name in (("U1", "alice"), ("U2", "bob")):
            await qapp.click(mail_id, person, user_name=name)
        await decided(qapp, mail_id)
        await submit_modal_as(qapp, rm_id, "U2")
        assert await approvals.resume(agent, "quorum-1") is not None
        assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund"}}]
        assert outputs(model)["call_rm"] == "Not today"
        assert len(qapp.slack.calls_to("chat.postMessage")) == 2


async def submit_modal_as(app: App, request_id: str, user: str) -> None:
    before = len(app.slack.calls_to("views.open"))
    await app.click(request_id, user, action="signoff_reject", user_name="bob")
    opened = (await app.slack.wait_for("views.open", count=before + 1))[-1]
    await app.slack_client.view_submission(user=user, user_name="bob", callback_id="signoff_reject",
                                           private_metadata=opened.args["view"]["private_metadata"],
                                           values={"reason": {"value": plain_input("Not today")}})
    await decided(app, request_id)


async def test_a_resumer_that_died_mid_way_is_taken_over_and_its_approved_call_is_not_run_again(
        db_url: str, slack: SlackEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumer claimed the turn and died (its lease runs out): the next resumer takes the claim over
    and finishes the run, but cannot know whether the approved call ran, so it does not run it again;
    the model is told its outcome is unknown."""
    monkeypatch.setenv("OA_CALLS", str(tmp_path / "calls.jsonl"))
    (tmp_path / "policy.yaml").write_text(POLICY)
    clock = ShiftedClock()
    app = await start_app(db_url, slack, clock=clock, SIGNOFF_POLICY=str(tmp_path / "policy.yaml"))
    try:
        async with AsyncSignoffClient(app.url, API_TOKEN) as client:
            approvals = Approvals(tmp_path / "runs", client=client, channel="C1", approvers=["U1"])
            agent, model, request_id = await started(approvals, [[email()], done()], "died-1")
            await app.click(request_id, "U1", user_name="alice")
            await decided(app, request_id)
            paused = approvals.paused("died-1")
            assert paused is not None
            assert await client.claim_resume(paused.key, "dead-host|1|gone", lease_seconds=5) is not None
            assert await approvals.resume(agent, "died-1") is None  # its lease still runs
            clock.advance(6)
            result = await approvals.resume(agent, "died-1")
            assert result is not None and result.final_output == "done"
            assert calls() == []  # not run a second time (nor a first, here: that is what nobody can know)
            assert outputs(model) == {"call_mail": UNKNOWN}
            claim = await client.get_resume(paused.key)
            assert claim is not None and claim.state == "done" and claim.owner == approvals.owner
    finally:
        await app.stop()


async def test_an_async_tool_taking_its_tool_context_runs_with_the_edit(papp: App, approvals: Approvals) -> None:
    seen: list[tuple[str, str, int]] = []

    @approvals.tool
    async def refund(ctx: ToolContext[Any], order: str, amount: int) -> str:
        """Refund an order."""
        seen.append((ctx.tool_call_id, order, amount))
        return f"refunded {amount} on {order}"

    model = ScriptedModel([[function_call("refund", {"order": "A-1", "amount": 90}, call_id="call_refund")], done()])
    agent = Agent(name="payer", model=model, tools=[refund])
    paused = await approvals.pause(await Runner.run(agent, "Refund A-1"), "ctx-1")
    assert paused is not None
    [request_id] = paused.request_ids
    await submit_modal(papp, request_id, "signoff_edit", {"p:order": {"value": plain_input("A-1")},
                                                          "p:amount": {"value": plain_input("40")}})
    assert await approvals.resume(agent, "ctx-1") is not None
    assert seen == [("call_refund", "A-1", 40)]
    assert outputs(model) == {"call_refund": "refunded 40 on A-1"}


async def test_a_call_the_sdk_would_change_before_running_is_asked_about_even_if_policy_allows_it(
        papp: App, approvals: Approvals) -> None:
    """The SDK asks `needs_approval` only about arguments the tool gets exactly as shown: here a default
    would be filled in (policy would judge a call that is not the one that runs), so the call pauses
    and a person sees it, although policy allows `archive_*`."""
    ran: list[tuple[str, int]] = []

    @approvals.tool
    def archive_logs(name: str, keep_days: int = 0) -> str:
        """Archive logs."""
        ran.append((name, keep_days))
        return "archived"

    model = ScriptedModel([[function_call("archive_logs", {"name": "web"}, call_id="call_arch")], done()])
    agent = Agent(name="ops", model=model, tools=[archive_logs])
    result = await Runner.run(agent, "Archive the web logs")
    assert [i.call_id for i in result.interruptions] == ["call_arch"] and ran == []
    model2 = ScriptedModel([[function_call("archive_logs", {"name": "web", "keep_days": 7}, call_id="call_a2")],
                            done()])
    allowed = await Runner.run(Agent(name="ops", model=model2, tools=[archive_logs]), "Archive the web logs")
    assert allowed.interruptions == [] and ran == [("web", 7)]  # given in full: policy allows it, no pause


async def test_a_resume_whose_run_raised_stays_failed_and_is_not_retried(papp: App, approvals: Approvals) -> None:
    @approvals.tool(failure_error_function=None)
    def send_fax(number: str) -> str:
        """Send a fax."""
        raise RuntimeError("the fax machine is on fire")

    model = ScriptedModel([[function_call("send_fax", {"number": "555"}, call_id="call_fax")], done()])
    agent = Agent(name="office", model=model, tools=[send_fax])
    paused = await approvals.pause(await Runner.run(agent, "Fax it"), "fax-1")
    assert paused is not None
    [request_id] = paused.request_ids
    await papp.click(request_id, "U1", user_name="alice")
    await decided(papp, request_id)
    with pytest.raises(Exception, match="on fire"):
        await approvals.resume(agent, "fax-1")
    claim = await approvals.client.get_resume(paused.key)
    assert claim is not None and claim.state == "failed" and "on fire" in str(claim.raw.get("error"))
    with pytest.raises(SignoffError, match="failed earlier and is not retried: .*on fire"):
        await approvals.resume(agent, "fax-1")


async def test_a_run_that_pauses_again_gets_the_next_turns_card_and_resumes_twice(
        papp: App, approvals: Approvals) -> None:
    second_turn = [function_call("send_email", {"to": "d@example.com", "subject": "Also"}, call_id="call_mail_2")]
    agent, model, first_id = await started(approvals, [[email()], second_turn, done("Both.")], "turns-1")
    await papp.click(first_id, "U1", user_name="alice")
    await decided(papp, first_id)
    middle = await approvals.resume(agent, "turns-1")
    assert middle is not None and [i.call_id for i in middle.interruptions] == ["call_mail_2"]
    paused = approvals.paused("turns-1")
    assert paused is not None and paused.turn == 2 and paused.request_ids != (first_id,)
    [second_id] = paused.request_ids
    assert await approvals.resume(agent, "turns-1") is None  # the new card is undecided
    await papp.click(second_id, "U1", user_name="alice")
    await decided(papp, second_id)
    final = await approvals.resume(agent, "turns-1")
    assert final is not None and final.final_output == "Both."
    assert [c["args"]["to"] for c in calls()] == ["c@example.com", "d@example.com"]
    assert len(papp.slack.calls_to("chat.postMessage")) == 2


async def test_reply_instead_reaches_the_model_and_the_tool_does_not_run(papp: App, approvals: Approvals) -> None:
    agent, model, request_id = await started(approvals, [[email()], done()], "reply-1")
    await submit_modal(papp, request_id, "signoff_respond", {"reason": {"value": plain_input("I called them myself.")}})
    assert await approvals.resume(agent, "reply-1") is not None
    assert calls() == []
    assert outputs(model) == {"call_mail": "I called them myself."}


async def test_a_card_nobody_can_see_is_cancelled_and_the_run_resumes_as_not_approved(
        papp: App, approvals: Approvals) -> None:
    nowhere = Approvals(approvals.store, client=approvals.client, channel="CNOWHERE")
    agent, model = build(nowhere, [[email()], done()])
    paused = await nowhere.pause(await Runner.run(agent, "Send it"), "nowhere-1")
    assert paused is not None
    result = await nowhere.resume(agent, "nowhere-1", wait=20)
    assert result is not None and calls() == []
    [said] = outputs(model).values()
    assert said.startswith("Not approved: ") and "channel_not_found" in said, said
    _, body = await papp.api("GET", f"/api/v1/approvals/{paused.request_ids[0]}")
    assert body["status"] == "cancelled"
