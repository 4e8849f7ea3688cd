"""LangGraph `interrupt()` and LangChain's HumanInTheLoopMiddleware, decided in Slack, resumed anywhere.

Real langgraph / langchain, a real SqliteSaver, the running Signoff and the fake Slack with signed clicks.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from langchain_core.messages import ToolMessage

from signoff import SignoffClient
from signoff.langgraph import post_cards
from signoff.langgraph_resume import Resumer
from bot.sandbox.signed import plain_input
from tests.approvals.batch_steps import approve_selected, controls, item_state, open_item, submit
from tests.fakes.flaky_proxy import FlakyProxy
from bot.sandbox import SlackEmulator
from tests.support.app import API_TOKEN, ROOT, App, ShiftedClock, start_app
from tests.support.waits import until
from tests.client.helpers import agent_process_env
from tests.client.lg_graphs import (
    calls,
    hitl_agent,
    hitl_agent_per_call,
    question_graph,
    release_graph,
    saver,
    tool_graph,
    two_step_graph,
)

CARD = {"channel": "C1", "approvers": ["U1"]}
PICK, ITEM_EDIT, ITEM_REJECT, ITEM_REPLY = ("signoff_item_pick", "signoff_item_edit", "signoff_item_reject",
                                            "signoff_item_respond")


@pytest.fixture
def client(app: App) -> Iterator[SignoffClient]:
    with SignoffClient(app.url, API_TOKEN) as opened:
        yield opened


@pytest.fixture
def lg_env(app: App, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    return agent_process_env(app, "LG_CALLS", tmp_path / "calls.jsonl", monkeypatch)


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


async def decided(app: App, request_id: str) -> dict[str, Any]:
    _, body = await app.api("GET", f"/api/v1/approvals/{request_id}?wait=10")
    assert body["status"] != "pending", body
    return body


async def submit_modal(app: App, request_id: str, action: str, values: dict[str, Any]) -> dict[str, Any]:
    """Click `action` on the request's card, fill its modal with `values`, and wait for the decision."""
    before = len(app.slack.calls_to("views.open"))
    await app.click(request_id, "U1", action=action, user_name="alice")
    opened = (await app.slack.wait_for("views.open", count=before + 1))[-1]
    await app.slack_client.view_submission(user="U1", user_name="alice", callback_id=action,
                                           private_metadata=opened.args["view"]["private_metadata"], values=values)
    return await decided(app, request_id)


async def run(cmd: list[str], env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode()


async def test_a_tool_node_paused_in_one_process_resumes_with_the_edit_in_another(
        app: App, lg_env: dict[str, str], tmp_path: Path) -> None:
    db = str(tmp_path / "checkpoints.db")
    # The agent process starts the graph, hits the interrupt, and exits.
    out = await run([sys.executable, "-m", "tests.client.lg_graphs", db, "refund-7"], lg_env)
    [value] = json.loads(out)
    request_id = value["signoff"]["request_id"]
    assert value["action"] == {"name": "send_email", "params": {"to": "customer@example.com", "subject": "Your refund"}}
    body = await submit_modal(app, request_id, "signoff_edit", {
        "p:to": {"value": plain_input("customer@example.com")},
        "p:subject": {"value": plain_input("Your refund of $45")}})
    assert body["decision"]["changes"] == [{"field": "subject", "from": "Your refund", "to": "Your refund of $45"}]
    # Another process resumes the thread from the checkpoint with the decision.
    await run([sys.executable, "-m", "bot", "langgraph", "resume", "--graph", "tests.client.lg_graphs:tool_graph",
               "--db", db, "--once"], lg_env)
    assert calls() == [{"tool": "send_email", "args": {"to": "customer@example.com", "subject": "Your refund of $45"}}]
    state = tool_graph(saver(db)).get_state(thread("refund-7"))
    assert state.next == () and state.values["sent"]["result"] == "sent to customer@example.com: Your refund of $45"
    # Node replay: the tool node ran twice (paused, then resumed), and found its request the second time.
    assert Path(lg_env["LG_CALLS"] + ".node-runs").read_text().count("run") == 2
    assert len(app.slack.calls_to("chat.postMessage")) == 1


async def test_two_resumers_on_one_decision_resume_the_graph_once(app: App, lg_env: dict[str, str],
                                                                   tmp_path: Path, client: SignoffClient) -> None:
    db = str(tmp_path / "checkpoints.db")
    result = await asyncio.to_thread(tool_graph(saver(db)).invoke, {"request": "refund"}, thread("t-2"))
    request_id = result["__interrupt__"][0].value["signoff"]["request_id"]
    await app.click(request_id, "U1", user_name="alice")
    await decided(app, request_id)
    # Two resumers, each with its own connection to the checkpoint file (as two processes would be).
    first, second = (Resumer(tool_graph, saver(db), client=client) for _ in range(2))
    outcomes = await asyncio.gather(asyncio.to_thread(first.resume_ready), asyncio.to_thread(second.resume_ready))
    assert sorted(outcomes) == [[], ["t-2"]]
    assert [c["tool"] for c in calls()] == ["send_email"]
    assert await asyncio.to_thread(first.resume_ready) == [] and len(calls()) == 1  # never applied twice


async def test_hitl_middleware_two_tools_one_turn_one_card_edit_one_approve_the_other(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("agent-1")
    agent = hitl_agent(saver(db))
    result = await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, config)
    [paused] = result["__interrupt__"]
    assert [a["name"] for a in paused.value["action_requests"]] == ["send_email", "delete_file"]
    [batch_id] = await asyncio.to_thread(post_cards, agent, config, client=client, **CARD)
    assert await asyncio.to_thread(post_cards, agent, config, client=client, **CARD) == [batch_id]
    card = await app.card(batch_id)
    assert len(app.slack.calls_to("chat.postMessage")) == 1  # one interrupt, one card
    assert controls(card, 0) == [PICK, ITEM_EDIT, ITEM_REJECT, ITEM_REPLY]
    # delete_file's config forbids editing: no Edit for it, and "Reply" for respond.
    assert controls(card, 1) == [PICK, ITEM_REJECT, ITEM_REPLY]
    view = await open_item(app, batch_id, 0, ITEM_EDIT)
    await submit(app, view, {"p:to": {"value": plain_input("b@example.com")}, "p:subject": {"value": plain_input("Hi")}})
    await item_state(app, batch_id, 0)
    resumer = Resumer(hitl_agent, saver(db), client=client, **CARD)
    assert await asyncio.to_thread(resumer.resume_ready) == []  # waits for every action of the interrupt
    await approve_selected(app, batch_id, [1])
    body = await decided(app, batch_id)
    assert [i["outcome"] for i in body["decision"]["items"]] == ["approved", "approved"]
    assert await asyncio.to_thread(resumer.resume_ready) == ["agent-1"]
    # Both ran (in parallel, as LangGraph runs one turn's tool calls), send_email with the edit.
    assert sorted(calls(), key=lambda c: c["tool"]) == [
        {"tool": "delete_file", "args": {"path": "/tmp/report.txt"}},
        {"tool": "send_email", "args": {"to": "b@example.com", "subject": "Hi"}}]
    final = agent.get_state(config).values["messages"][-1]
    assert "sent to b@example.com: Hi" in final.content and "deleted /tmp/report.txt" in final.content
    assert len(app.slack.calls_to("chat.postMessage")) == 1  # the resumer found the card, never posted another


async def test_a_resumer_given_other_card_options_than_post_cards_says_which_to_give(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient,
        caplog: pytest.LogCaptureFixture) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("agent-9")
    agent = hitl_agent(saver(db))
    await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, config)
    [batch_id] = await asyncio.to_thread(post_cards, agent, config, client=client, **CARD)
    other = Resumer(hitl_agent, saver(db), client=client, channel="C1", approvers=["U2"])  # not post_cards' U1
    assert await asyncio.to_thread(other.resume_ready) == []
    [said] = [r.getMessage() for r in caplog.records if "cannot ask about thread agent-9" in r.getMessage()]
    assert "HTTP 409" in said and "give the resumer the same channel, approvers, risk" in said, said
    _, listing = await app.api("GET", "/api/v1/approvals")
    assert [i["id"] for i in listing["items"]] == [batch_id]  # nothing posted twice


async def test_hitl_reject_and_respond_reach_the_model_as_langchain_documents(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("agent-2")
    agent = hitl_agent(saver(db))
    await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, config)
    [batch_id] = await asyncio.to_thread(post_cards, agent, config, client=client, **CARD)
    view = await open_item(app, batch_id, 0, ITEM_REJECT)
    await submit(app, view, {"reason": {"value": plain_input("Not on a Sunday")}})
    await item_state(app, batch_id, 0)
    view = await open_item(app, batch_id, 1, ITEM_REPLY)
    await submit(app, view, {"reason": {"value": plain_input("Already deleted it myself.")}})
    body = await decided(app, batch_id)
    assert [(i["outcome"], i["via"]) for i in body["decision"]["items"]] == [("rejected", "modal"), ("rejected", "reply")]
    resumer = Resumer(hitl_agent, saver(db), client=client, **CARD)
    assert await asyncio.to_thread(resumer.resume_ready) == ["agent-2"]
    assert calls() == []  # neither tool ran
    results = {m.name: m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage)}
    assert results["send_email"].status == "error"
    assert results["send_email"].content == "User rejected the tool call for `send_email` with reason: Not on a Sunday"
    assert results["delete_file"].status == "success" and results["delete_file"].content == "Already deleted it myself."


async def test_hitl_per_call_mode_resumes_each_interrupt_by_its_id(app: App, lg_env: dict[str, str],
                                                                   tmp_path: Path, client: SignoffClient) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("agent-3")
    agent = hitl_agent_per_call(saver(db))
    result = await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, config)
    assert sorted(i.value["name"] for i in result["__interrupt__"]) == ["delete_file", "send_email"]
    resumer = Resumer(hitl_agent_per_call, saver(db), client=client, **CARD)
    assert await asyncio.to_thread(resumer.resume_ready) == []  # posts the cards; nothing decided yet
    _, listed = await app.api("GET", "/api/v1/approvals?status=pending")
    by_name = {r["action"]["name"]: r for r in listed["items"]}
    assert by_name["send_email"]["action"]["params_schema"]["properties"]["to"]["type"] == "string"
    assert by_name["delete_file"]["allowed_decisions"] == ["approve", "reject", "respond"]
    await app.click(by_name["send_email"]["id"], "U1", user_name="alice")
    await decided(app, by_name["send_email"]["id"])
    assert await asyncio.to_thread(resumer.resume_ready) == []  # waits for every interrupt of the thread
    await submit_modal(app, by_name["delete_file"]["id"], "signoff_respond",
                       {"reason": {"value": plain_input("Keep it.")}})
    assert await asyncio.to_thread(resumer.resume_ready) == ["agent-3"]
    assert calls() == [{"tool": "send_email", "args": {"to": "a@example.com", "subject": "Hi"}}]
    final = agent.get_state(config).values["messages"][-1]
    assert "delete_file[success]: Keep it." in final.content


LEASE = 60


async def test_a_resumer_killed_mid_way_is_finished_by_the_next_once_its_lease_runs_out(
        db_url: str, slack: SlackEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ShiftedClock()
    app = await start_app(db_url, slack, clock=clock)
    try:
        lg_env = {**os.environ, "SIGNOFF_URL": app.url, "SIGNOFF_TOKEN": API_TOKEN,
                  "LG_CALLS": str(tmp_path / "calls.jsonl"), "PYTHONPATH": str(ROOT)}
        for name in ("SIGNOFF_URL", "SIGNOFF_TOKEN", "LG_CALLS"):  # the graph's first run is in this process
            monkeypatch.setenv(name, lg_env[name])
        await killed_mid_way(app, clock, lg_env, tmp_path)
    finally:
        await app.stop()


async def killed_mid_way(app: App, clock: ShiftedClock, lg_env: dict[str, str], tmp_path: Path) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("t-kill")
    result = await asyncio.to_thread(two_step_graph(saver(db)).invoke, {}, config)
    request_id = result["__interrupt__"][0].value["signoff"]["request_id"]
    await app.click(request_id, "U1", user_name="alice")
    await decided(app, request_id)
    fifo = tmp_path / "block"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "bot", "langgraph", "resume", "--graph",
               "tests.client.lg_graphs:two_step_graph", "--db", db, "--once", "--lease", str(LEASE)]
    first = await asyncio.create_subprocess_exec(*command, env={**lg_env, "LG_BLOCK": str(fifo)}, cwd=ROOT)
    await until(lambda: len(calls()) == 1)  # past the interrupt, inside the next node's tool
    first.kill()
    await first.wait()
    state = two_step_graph(saver(db)).get_state(config)
    assert state.interrupts == () and state.next == ("send",)
    key = state.metadata["signoff_resume"]  # the claim the dead resumer held, named in its checkpoints
    assert (await claim_of(app, key))["state"] == "resuming"
    await run(command, lg_env)  # its lease still runs: a new resumer leaves the thread alone
    assert len(calls()) == 1 and two_step_graph(saver(db)).get_state(config).next == ("send",)
    clock.advance(LEASE + 1)  # the dead resumer's lease runs out on the server's clock
    await run(command, lg_env)  # a new resumer takes the claim over and finishes the job
    state = two_step_graph(saver(db)).get_state(config)
    assert state.next == () and state.values["sent"] == "ok"
    assert (await claim_of(app, key))["state"] == "done"
    # The tool step the dead resumer was in ran again (LangGraph re-runs an unfinished step).
    assert [c["tool"] for c in calls()] == ["send_email", "send_email"]


async def test_a_resume_whose_graph_raised_is_kept_failed_and_not_retried(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient,
        monkeypatch: pytest.MonkeyPatch) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("t-fail")
    result = await asyncio.to_thread(two_step_graph(saver(db)).invoke, {}, config)
    request_id = result["__interrupt__"][0].value["signoff"]["request_id"]
    await app.click(request_id, "U1", user_name="alice")
    await decided(app, request_id)
    monkeypatch.setenv("LG_FAIL", "the mail server is down")
    resumer = Resumer(two_step_graph, saver(db), client=client)
    assert await asyncio.to_thread(resumer.resume_ready) == []
    state = two_step_graph(saver(db)).get_state(config)
    assert state.next == ("send",)  # stopped in the step that raised
    claim = await claim_of(app, state.metadata["signoff_resume"])
    assert claim["state"] == "failed" and claim["error"] == "RuntimeError: the mail server is down"
    monkeypatch.delenv("LG_FAIL")
    # Neither this resumer nor a new one tries it again by itself; this one stops reading the thread.
    assert await asyncio.to_thread(Resumer(two_step_graph, saver(db), client=client).resume_ready) == []
    assert await asyncio.to_thread(resumer.resume_ready) == [] and "t-fail" in resumer.resuming.quiet
    assert len(calls()) == 1 and (await claim_of(app, claim["key"]))["state"] == "failed"


async def answer_production_once_waited(app: App, question_id: str, resumer: Any) -> None:
    """Once the resumer (sync or async) long-polls the question, alice chooses the second option,
    production, in Slack; until the graph's deploy ran with it."""
    card = await app.card(question_id)
    await until(lambda: question_id in resumer.resuming.waiting, f"the resumer to long-poll {question_id}")
    choice = [e for b in card.blocks if b["type"] == "actions" for e in b["elements"]][1]
    await app.slack_client.block_action(user="U1", user_name="alice", action_id=choice["action_id"],
                                        value=question_id, block_id="signoff_q0", channel=card.channel,
                                        message_ts=card.ts)
    await until(lambda: calls() == [{"tool": "deploy", "args": {"env": "production"}}], "the deploy to production",
                timeout=30)


async def test_a_running_resumer_is_woken_by_the_answer_to_ask(app: App, lg_env: dict[str, str],
                                                                tmp_path: Path, client: SignoffClient) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("t-ask")
    result = await asyncio.to_thread(question_graph(saver(db)).invoke, {}, config)
    question_id = result["__interrupt__"][0].value["signoff"]["request_id"]
    assert question_id.startswith("qst_")
    # A long scan interval: only the long-poll's push can wake the resumer in time for this test.
    resumer = Resumer(question_graph, saver(db), client=client, scan_every=60)
    stop = threading.Event()
    running = asyncio.create_task(asyncio.to_thread(resumer.run, stop=stop))
    try:
        await answer_production_once_waited(app, question_id, resumer)
    finally:
        stop.set()
        await running
        resumer.close()
    assert question_graph(saver(db)).get_state(config).values["deployed"] == "production"


async def test_two_approvals_in_one_node_each_get_one_card_across_replays(
        app: App, lg_env: dict[str, str], tmp_path: Path, client: SignoffClient) -> None:
    db, config = str(tmp_path / "checkpoints.db"), thread("t-release")
    result = await asyncio.to_thread(release_graph(saver(db)).invoke, {}, config)
    tag_id = result["__interrupt__"][0].value["signoff"]["request_id"]
    resumer = Resumer(release_graph, saver(db), client=client)
    await app.click(tag_id, "U1", user_name="alice")
    await decided(app, tag_id)
    assert await asyncio.to_thread(resumer.resume_ready) == ["t-release"]  # replays, pauses at the second
    [paused] = release_graph(saver(db)).get_state(config).interrupts
    push_id = paused.value["signoff"]["request_id"]
    assert push_id != tag_id and paused.value["action"]["name"] == "git_push"
    await app.click(push_id, "U1", user_name="alice")
    await decided(app, push_id)
    assert await asyncio.to_thread(resumer.resume_ready) == ["t-release"]
    assert calls() == [{"tool": "release", "args": {"remote": "origin", "tag": "v2.0"}}]
    # Three runs of the node, two cards: every replay found the requests it had made.
    assert len(app.slack.calls_to("chat.postMessage")) == 2


async def claim_of(app: App, key: str) -> dict[str, Any]:
    status, body = await app.api("GET", f"/api/v1/resumes/{quote(key, safe='')}")
    assert status == 200, body
    return dict(body)


async def test_a_resumer_on_an_undeliverable_card_resumes_it_as_not_approved_and_never_spins(
        app: App, lg_env: dict[str, str], tmp_path: Path, proxy: FlakyProxy, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 34: the card of a paused thread goes to a channel Slack does not know. Nobody can see it,
    so it is not approved: the resumer cancels the request it made, says why once (cause and fix) and
    resumes the thread with neither tool run; it never polls in a tight loop meanwhile."""
    db, config = str(tmp_path / "checkpoints.db"), thread("agent-nowhere")
    agent = hitl_agent(saver(db))
    await asyncio.to_thread(agent.invoke, {"messages": [{"role": "user", "content": "tidy up"}]}, config)
    with SignoffClient(proxy.url, API_TOKEN) as client:
        resumer = Resumer(hitl_agent, saver(db), client=client, channel="C0123ABCD", approvers=["U1"], scan_every=1)
        stop = threading.Event()
        running = asyncio.create_task(asyncio.to_thread(resumer.run, stop=stop))
        try:
            await until(lambda: not hitl_agent(saver(db)).get_state(config).next)  # resumed to its end
            await asyncio.sleep(2)  # deliberate: two more rounds at scan_every=1, a pace under test (requests counted)
        finally:
            stop.set()
            await running
            resumer.close()
    warned = [r.getMessage() for r in caplog.records if "channel_not_found" in r.getMessage()
              and r.name == "signoff.langgraph"]
    assert len(warned) == 1 and "agent-nowhere" in warned[0] and "does not exist" in warned[0], warned
    assert "not approved" in warned[0] and "cancelled" in warned[0]
    assert calls() == []  # neither tool ran
    _, listed = await app.api("GET", "/api/v1/approvals?status=cancelled")
    bodies = listed["items"]
    assert len(bodies) == 1 and "could not be posted" in bodies[0]["decision"]["comment"]
    assert proxy.seen("GET /api/v1/approvals/") <= 12  # a look per round; before: thousands
