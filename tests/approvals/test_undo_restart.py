"""SIGKILL inside the undo window: the held approval is a stored timer, so the next process (or any
replica) delivers the decision once when the window ends: one decision, one webhook. A batch's held
approval is delivered the same way, each item as the click decided it, and an Undo pressed on the next
process, still inside the window, takes it back as it would have on the first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.sandbox import SlackEmulator
from storage.sql import SqlStore
from bot.sandbox.signed import plain_input
from tests.approvals.batch_steps import approve_selected, item_state, open_item, submit
from tests.approvals.test_batch import submit_batch
from tests.approvals.undo_steps import POLICY, buttons, card_text, undo_click
from tests.approvals.timer_procs import calls, client, log_tail, quiet, server_env
from tests.fakes.clock import ClockFile
from tests.process.chaos import Receiver
from tests.support.app import App
from tests.support.process import ServerProcess
from tests.support.waits import more_sweeps, until

pytestmark = pytest.mark.chaos


class Restarted:
    """Two `signoff serve` processes on one database under the undo policy (`undo: 30s`) and one clock
    file, the second started after the first is SIGKILLed; `api` talks to the one running; `hooks`
    receives every webhook."""

    def __init__(self, db_url: str, slack: SlackEmulator, tmp_path: Path) -> None:
        self.clock = ClockFile(tmp_path / "clock.txt")
        policy = tmp_path / "policy.yaml"
        policy.write_text(POLICY)
        env = {**server_env(self.clock), "SIGNOFF_POLICY": str(policy), "SIGNOFF_EGRESS_ALLOW": "127.0.0.1"}
        self.first, self.second = ServerProcess(db_url, slack, **env), ServerProcess(db_url, slack, **env)
        self.slack, self.tmp_path, self.hooks = slack, tmp_path, Receiver()
        self.api: App | None = None

    async def __aenter__(self) -> Restarted:
        await self.hooks.start()
        await self.first.start(self.tmp_path)
        self.api = client(self.first, self.slack)
        return self

    async def restart(self, **advance: float) -> App:
        """SIGKILL the first process (nothing it held in memory survives), move the clock by `advance`
        while no process runs, start the second: the client that talks to it."""
        self.first.kill()
        if advance:
            self.clock.advance(**advance)
        await self.second.start(self.tmp_path)
        assert self.api is not None
        await self.api.stop()
        self.api = client(self.second, self.slack)
        return self.api

    async def settled(self, store: SqlStore) -> None:
        """Nothing due, nothing in the outbox, and a few more sweeps of each that found nothing more to do."""
        await quiet(store, self.clock)
        await more_sweeps(self.second.url, "timers", 5)
        await more_sweeps(self.second.url, "outbox", 5)

    async def __aexit__(self, *exc: object) -> None:
        if self.api is not None:
            await self.api.stop()
        await self.hooks.stop()
        self.first.kill()
        self.second.stop()


@pytest.fixture
async def run(db_url: str, slack: SlackEmulator, tmp_path: Path) -> AsyncIterator[Restarted]:
    async with Restarted(db_url, slack, tmp_path) as running:
        yield running


async def audit(store: SqlStore, request_id: str) -> list[str]:
    return [e.type for e in await store.audit_events(request_id)]


async def test_sigkill_inside_the_window_still_delivers_the_decision_once_when_it_ends(
        run: Restarted, slack: SlackEmulator, store: SqlStore) -> None:
    api, clock = run.api, run.clock
    assert api is not None
    req = await api.submit(callback_url=run.hooks.url)
    await calls(slack, clock, "chat.postMessage", 1)
    await api.card(req["id"], timeout=30)
    await quiet(store, clock)
    await api.click(req["id"], "U1", user_name="alice")
    await calls(slack, clock, "chat.update", 1)  # "runs in 30 s · Undo"
    assert (await store.get_request(req["id"])).undo_until is not None  # type: ignore[union-attr]

    api = await run.restart(seconds=45)  # inside the window; it ended while no process ran
    status, body = await api.api("GET", f"/api/v1/approvals/{req['id']}?wait=30")
    assert status == 200 and body["status"] == "approved", (body, log_tail(run.first, run.second))
    assert body["decision"]["decided_by"]["id"] == "U1"
    await calls(slack, clock, "chat.update", 2)
    await run.settled(store)
    events = await audit(store, req["id"])
    assert events.count("approval_held") == 1 and events.count("decided") == 1, events
    assert run.hooks.by_request[req["id"]] == 1, run.hooks.by_request
    # The held card's update, sent by the killed process but not recorded, is sent again by the next
    # one (chat.update renders the request as it is now, and is idempotent): every later update shows
    # the decision, none offers Undo.
    updates = slack.calls_to("chat.update")
    assert "signoff_undo" in str(updates[0].args["blocks"])
    assert all(u.args["text"].startswith("Approved:") and "signoff_undo" not in str(u.args["blocks"])
               for u in updates[1:]), [u.args["text"] for u in updates]


def outcomes(body: dict[str, Any]) -> list[str | None]:
    return [i["outcome"] for i in body["items"]]


async def test_a_held_batch_is_delivered_once_per_item_after_a_sigkill_and_undo_still_works_on_the_next_process(
        run: Restarted, slack: SlackEmulator, store: SqlStore) -> None:
    api, clock = run.api, run.clock
    assert api is not None
    kept = await submit_batch(api, 3, callback_url=run.hooks.url)
    taken_back = await submit_batch(api, 3, callback_url=run.hooks.url)
    ids = [kept["id"], taken_back["id"]]
    await calls(slack, clock, "chat.postMessage", 2)
    cards = {rid: await api.card(rid, timeout=30) for rid in ids}
    await quiet(store, clock)
    # One batch approved as a whole by one click: the ticked items approved, the other rejected.
    await approve_selected(api, kept["id"], [0, 2])
    # The other item by item: the first rejected on its own (stored at once, the batch still waits),
    # then Approve selected decides the rest.
    view = await open_item(api, taken_back["id"], 0, "signoff_item_reject")
    await submit(api, view, {"reason": {"value": plain_input("Wrong customer")}})
    assert (await item_state(api, taken_back["id"], 0))["outcome"] == "rejected"
    await approve_selected(api, taken_back["id"], [1, 2])
    for rid in ids:  # both cards: "runs in 30 s · Undo"
        await until(lambda r=rid: "runs in 30 s" in card_text(slack, api, cards[r].channel, cards[r].ts),
                    f"the card of {rid} held", timeout=30)
    for rid in ids:
        held = await store.get_request(rid)
        assert held is not None and held.is_pending and held.undo_until is not None, held

    await quiet(store, clock)  # every card update recorded: the next process has nothing to take over
    api = await run.restart()  # SIGKILL inside both windows; the clock stands still meanwhile
    updates = len(slack.calls_to("chat.update"))
    for rid, before in zip(ids, ([None] * 3, ["rejected", None, None])):  # held: the agent still waits
        _, body = await api.api("GET", f"/api/v1/approvals/{rid}")
        assert body["status"] == "pending" and outcomes(body) == before, body

    # Undo on the next process, inside the window: what the held click decided is pending again (the
    # item rejected before keeps its outcome), nothing was delivered.
    card = cards[taken_back["id"]]
    await undo_click(api, taken_back["id"], "U1")
    await until(lambda: "undid their approval" in card_text(slack, api, card.channel, card.ts),
                "the undone batch's card", timeout=30)
    assert "signoff_batch_approve" in buttons(slack, card.channel, card.ts)
    assert not slack.calls_to("chat.postEphemeral"), slack.calls_to("chat.postEphemeral")
    _, body = await api.api("GET", f"/api/v1/approvals/{taken_back['id']}")
    assert body["status"] == "pending" and outcomes(body) == ["rejected", None, None], body
    # ... and approved again there: only the last item ticked this time.
    await approve_selected(api, taken_back["id"], [2])
    await until(lambda: "runs in 30 s" in card_text(slack, api, card.channel, card.ts),
                "the batch held again", timeout=30)
    assert len(slack.calls_to("chat.update")) > updates

    clock.advance(seconds=45)  # both windows end
    polls = await asyncio.gather(*(api.api("GET", f"/api/v1/approvals/{rid}?wait=30") for rid in ids))
    for (status, body), expected in zip(polls, (["approved", "rejected", "approved"], ["rejected", "rejected", "approved"])):
        assert status == 200 and body["status"] == "approved", (body, log_tail(run.first, run.second))
        assert outcomes(body) == expected and body["decision"]["decided_by"]["id"] == "U1", body
    await run.settled(store)

    kept_events, taken_events = await audit(store, kept["id"]), await audit(store, taken_back["id"])
    assert kept_events.count("approval_held") == 1 and kept_events.count("decided") == 1, kept_events
    assert "undone" not in kept_events, kept_events
    assert taken_events.count("approval_held") == 2 and taken_events.count("undone") == 1, taken_events
    assert taken_events.count("decided") == 1, taken_events
    assert run.hooks.by_request == {kept["id"]: 1, taken_back["id"]: 1}, run.hooks.by_request
    delivered = {b["request"]["id"]: outcomes(b["request"]) for b in run.hooks.bodies}
    assert delivered == {kept["id"]: ["approved", "rejected", "approved"],
                         taken_back["id"]: ["rejected", "rejected", "approved"]}, delivered
    for rid in ids:  # every later look at the cards shows the decision, none offers Undo
        shown = slack.messages[(cards[rid].channel, cards[rid].ts)]
        assert "signoff_undo" not in str(shown.blocks) and "signoff_batch_approve" not in str(shown.blocks)
