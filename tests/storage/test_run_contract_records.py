"""The run store's contract, what hangs off a run: messages, tool executions, its requests, interventions.

Also the Slack event ids the run side dedupes on. Same backends and same rules as test_run_contract.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from bot.domain.model import Kind, Status
from bot.domain.runs import ExecStatus, Gate, Intervention, RunMessage, RunStatus
from tests.storage.conftest import RunStoreFactory
from tests.storage.run_values import (
    T0,
    RunStore,
    execution,
    in_unit,
    insert,
    insert_requests,
    keys_in_order,
    make_request,
    make_run,
    message,
)

# -- messages ----------------------------------------------------------------------------------------------


async def test_messages_in_seq_order_and_after_seq(run_store: RunStore) -> None:
    run, other = make_run(), make_run()
    await insert(run_store, run, other)
    content = [{"type": "tool_use", "id": "toolu_1", "name": "send_email",
                "input": {"zeta": 1, "alpha": {"y": 2, "x": [3, "✉️ 日本語"]}}}]
    async with run_store.unit() as unit:
        await unit.append_messages([message(run, 0, "user", "Do the thing"), RunMessage(run.id, 1, "assistant",
                                                                                       content, T0)])
        await unit.append_messages([])
    async with run_store.unit() as unit:
        await unit.append_messages([message(run, 3, "user"), message(run, 2, "user"), message(other, 0, "user")])
    everything = await run_store.messages(run.id)
    assert [(m.seq, m.role) for m in everything] == [(0, "user"), (1, "assistant"), (2, "user"), (3, "user")]
    assert everything[0] == message(run, 0, "user", "Do the thing")
    assert everything[1].content == content and keys_in_order(everything[1].content) == keys_in_order(content)
    assert all(m.created_at is not None and m.created_at.utcoffset() == timedelta(0) for m in everything)
    assert [m.seq for m in await run_store.messages(run.id, after_seq=1)] == [2, 3]
    assert await run_store.messages(run.id, after_seq=3) == []
    assert await run_store.messages(run.id, after_seq=-1) == everything
    assert [m.run_id for m in await run_store.messages(other.id)] == [other.id]
    assert await run_store.messages("run_unknown") == []


async def test_a_message_seq_is_written_once(run_store: RunStore) -> None:
    """Two writers appending the same step: the second fails and leaves the first's message intact."""
    run = make_run()
    await insert(run_store, run)
    async with run_store.unit() as unit:
        await unit.append_messages([message(run, 0, "user", "first")])
    with pytest.raises(Exception):  # the engine's integrity error: what it is named is not the contract
        async with run_store.unit() as unit:
            await unit.append_messages([message(run, 1, "assistant", "new"), message(run, 0, "user", "second")])
    assert await run_store.messages(run.id) == [message(run, 0, "user", "first")]


# -- tool executions ---------------------------------------------------------------------------------------


async def test_executions_round_trip_and_order(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    full = execution(
        run, "toolu_full", turn_seq=1, position=1, name="write_file",
        input={"zeta": "z", "alpha": [1, {"b": 0, "a": 1}]},
        gate=Gate.ASK, status=ExecStatus.FINISHED, risk="high", request_id="apr_x", final_input={"zeta": "edited ✓"},
        note="approved by <@U1> with edits", result=[{"type": "text", "text": "wrote it"}], is_error=True, attempts=2,
        started_at=T0 + timedelta(seconds=1), finished_at=T0 + timedelta(seconds=2, microseconds=5),
    )
    minimal = execution(run, "toolu_min", turn_seq=1, position=0, result=None)
    later = execution(run, "toolu_later", turn_seq=3, position=0, result="plain text", gate=Gate.QUESTION)
    async with run_store.unit() as unit:
        await unit.insert_executions([later, full])
        await unit.insert_executions([])
        await unit.insert_executions([minimal])
    assert await run_store.executions(run.id) == [minimal, full, later]
    [read] = [e for e in await run_store.executions(run.id) if e.tool_use_id == "toolu_full"]
    assert keys_in_order(read.input) == keys_in_order(full.input)
    assert await run_store.executions(run.id, turn_seq=1) == [minimal, full]
    assert await run_store.executions(run.id, turn_seq=3) == [later]
    assert await run_store.executions(run.id, turn_seq=2) == []
    assert await run_store.executions("run_unknown") == []


async def test_update_execution_is_guarded_by_status(run_store: RunStore) -> None:
    run = make_run()
    await insert(run_store, run)
    waiting = execution(run, "toolu_1", gate=Gate.ASK, status=ExecStatus.WAITING, request_id="apr_1")
    await in_unit(run_store, lambda u: u.insert_executions([waiting]))
    ready = waiting.evolve(status=ExecStatus.READY, final_input={"to": "b@example.com"}, note="edited")
    async with run_store.unit() as unit:
        assert not await unit.update_execution(ready, expected=ExecStatus.READY)
        assert await unit.update_execution(ready, expected=ExecStatus.WAITING)
        assert not await unit.update_execution(ready, expected=ExecStatus.WAITING)  # moved on already
    started = ready.evolve(status=ExecStatus.STARTED, attempts=1, started_at=T0 + timedelta(seconds=1))
    done = started.evolve(status=ExecStatus.FINISHED, result="sent", is_error=False,
                          finished_at=T0 + timedelta(seconds=2))
    async with run_store.unit() as unit:
        assert await unit.update_execution(started, expected=ExecStatus.READY)
        assert await unit.update_execution(done, expected=ExecStatus.STARTED)
    assert await run_store.executions(run.id) == [done]
    # The identity of a call (its turn, position, name, input, gate, risk) is never rewritten.
    moved = done.evolve(turn_seq=9, position=9, name="other", input={}, gate=Gate.INVALID, risk="critical",
                        status=ExecStatus.FINISHED, note="again")
    async with run_store.unit() as unit:
        assert await unit.update_execution(moved, expected=ExecStatus.FINISHED)
        assert not await unit.update_execution(execution(run, "toolu_unknown"), expected=ExecStatus.READY)
    assert await run_store.executions(run.id) == [done.evolve(note="again")]


async def test_racing_execution_updates_exactly_one_wins(run_store_factory: RunStoreFactory) -> None:
    stores = [await run_store_factory(), await run_store_factory()]
    run = make_run()
    await insert(stores[0], run)
    for round_ in range(5):
        waiting = execution(run, f"toolu_{round_}", status=ExecStatus.WAITING, gate=Gate.ASK)
        async with stores[0].unit() as unit:
            await unit.insert_executions([waiting])
        outcomes = [waiting.evolve(status=ExecStatus.READY, note=f"approved {n}") if n % 2 else
                    waiting.evolve(status=ExecStatus.FINISHED, note=f"rejected {n}", result="no") for n in range(6)]

        async def attempt(n: int) -> bool:
            async with stores[n % 2].unit() as unit:
                return await unit.update_execution(outcomes[n], expected=ExecStatus.WAITING)

        results = await asyncio.gather(*(attempt(n) for n in range(6)))
        assert results.count(True) == 1, round_
        [stored] = [e for e in await stores[1].executions(run.id) if e.tool_use_id == waiting.tool_use_id]
        assert stored == outcomes[results.index(True)]


# -- requests of a run -------------------------------------------------------------------------------------


async def test_open_requests(run_store: RunStore) -> None:
    run, other = make_run(status=RunStatus.WAITING), make_run()
    asked, question, decided, later_ask = (make_request(), make_request(Kind.QUESTION),
                                           make_request(status=Status.APPROVED), make_request())
    other_request = make_request()
    await insert(run_store, run, other)
    await insert_requests(run_store, asked, question, decided, later_ask, other_request)
    async with run_store.unit() as unit:
        await unit.insert_executions([
            execution(run, "t_later", turn_seq=3, position=0, gate=Gate.ASK, status=ExecStatus.WAITING,
                      request_id=later_ask.id),
            execution(run, "t_question", turn_seq=1, position=2, gate=Gate.QUESTION, status=ExecStatus.WAITING,
                      request_id=question.id),
            execution(run, "t_asked", turn_seq=1, position=1, gate=Gate.ASK, status=ExecStatus.WAITING,
                      request_id=asked.id),
            execution(run, "t_decided", turn_seq=1, position=0, gate=Gate.ASK, status=ExecStatus.READY,
                      request_id=decided.id),
            execution(run, "t_allowed", turn_seq=1, position=3),
            execution(other, "t_other", gate=Gate.ASK, status=ExecStatus.WAITING, request_id=other_request.id),
        ])
    # Oldest first (turn, then position); decided requests are not open.
    assert await run_store.open_requests(run.id) == [asked.id, question.id, later_ask.id]
    assert await run_store.open_requests(run.id, gate=Gate.ASK) == [asked.id, later_ask.id]
    assert await run_store.open_requests(run.id, gate=Gate.QUESTION) == [question.id]
    assert await run_store.open_requests(run.id, gate=Gate.ALLOW) == []
    assert await run_store.open_requests(other.id) == [other_request.id]
    assert await run_store.open_requests("run_unknown") == []
    # Deciding a request closes it.
    async with run_store.unit() as unit:
        assert await unit.update_request(asked.evolve(status=Status.REJECTED), expected_version=1)
    assert await run_store.open_requests(run.id) == [question.id, later_ask.id]


async def test_pending_question_by_card(run_store: RunStore) -> None:
    question = make_request(Kind.QUESTION, card_channel="C1", card_ts="1.1")
    approval = make_request(card_channel="C1", card_ts="2.2")
    answered = make_request(Kind.QUESTION, status=Status.ANSWERED, card_channel="C1", card_ts="3.3")
    await insert_requests(run_store, question, approval, answered)
    assert await run_store.pending_question_by_card("C1", "1.1") == question.id
    assert await run_store.pending_question_by_card("C2", "1.1") is None
    assert await run_store.pending_question_by_card("C1", "2.2") is None  # an approval is not a question
    assert await run_store.pending_question_by_card("C1", "3.3") is None  # answered already
    assert await run_store.pending_question_by_card("C1", "9.9") is None


async def test_find_run_by_root(run_store: RunStore) -> None:
    a, b = make_run(channel="C1", root_ts="1.0"), make_run(channel="C2", root_ts="1.0")
    await insert(run_store, a, b, make_run(channel="C1"))
    assert await run_store.find_run_by_root("C1", "1.0") == a
    assert await run_store.find_run_by_root("C2", "1.0") == b
    assert await run_store.find_run_by_root("C1", "2.0") is None
    assert await run_store.find_run_by_root("C3", "1.0") is None


# -- interventions -----------------------------------------------------------------------------------------


async def test_interventions_are_taken_once_oldest_first(run_store: RunStore) -> None:
    run, other = make_run(), make_run()
    await insert(run_store, run, other)
    assert not await run_store.has_interventions(run.id)
    first = Intervention(run.id, "Use the staging list ✓", "U1", T0 + timedelta(seconds=5), "zoë", "1.1")
    second = Intervention(run.id, "and cc me", "U2", T0)  # order is arrival order, not created_at
    async with run_store.unit() as unit:
        await unit.add_intervention(first)
        await unit.add_intervention(second)
        await unit.add_intervention(Intervention(other.id, "elsewhere", "U3", T0))
    assert await run_store.has_interventions(run.id)
    queued = await run_store.interventions(run.id)
    assert [(i.text, i.user_id, i.user_name, i.slack_ts, i.created_at, i.consumed_seq) for i in queued] == [
        (first.text, "U1", "zoë", "1.1", first.created_at, None), (second.text, "U2", None, None, T0, None)]
    assert all(i.id is not None for i in queued)
    async with run_store.unit() as unit:
        taken = await unit.take_interventions(run.id, 4)
    assert taken == [replace(i, consumed_seq=4) for i in queued]  # oldest first, marked as delivered in 4
    assert not await run_store.has_interventions(run.id)
    assert [i.consumed_seq for i in await run_store.interventions(run.id)] == [4, 4]
    async with run_store.unit() as unit:
        assert await unit.take_interventions(run.id, 6) == []
    # A later one is queued on its own; the other run's queue was never touched.
    async with run_store.unit() as unit:
        await unit.add_intervention(Intervention(run.id, "one more", "U1", T0))
    async with run_store.unit() as unit:
        assert [i.text for i in await unit.take_interventions(run.id, 7)] == ["one more"]
    assert [i.consumed_seq for i in await run_store.interventions(run.id)] == [4, 4, 7]
    assert await run_store.has_interventions(other.id)
    assert [i.text for i in await run_store.interventions(other.id)] == ["elsewhere"]
    assert await run_store.interventions("run_unknown") == []


async def test_racing_takers_deliver_each_intervention_once(run_store_factory: RunStoreFactory) -> None:
    stores = [await run_store_factory(), await run_store_factory()]
    run = make_run()
    await insert(stores[0], run)
    for round_ in range(5):
        async with stores[0].unit() as unit:
            for n in range(3):
                await unit.add_intervention(Intervention(run.id, f"r{round_} n{n}", "U1", T0))

        async def take(n: int) -> list[str]:
            async with stores[n % 2].unit() as unit:
                return [i.text for i in await unit.take_interventions(run.id, 100 * round_ + n)]

        results = await asyncio.gather(*(take(n) for n in range(4)))
        delivered = [text for r in results for text in r]
        assert sorted(delivered) == [f"r{round_} n{n}" for n in range(3)], (round_, results)
        assert not await stores[1].has_interventions(run.id)


# -- Slack event ids ---------------------------------------------------------------------------------------


async def test_first_time_and_forget_events(run_store: RunStore) -> None:
    async with run_store.unit() as unit:
        assert await unit.first_time("Ev_old", T0)
        assert not await unit.first_time("Ev_old", T0 + timedelta(seconds=1))  # seen in this very unit
        assert await unit.first_time("Ev_new", T0 + timedelta(hours=1))
    async with run_store.unit() as unit:
        assert not await unit.first_time("Ev_old", T0 + timedelta(hours=2))
    assert await run_store.forget_events(before=T0) == 0  # strictly before
    assert await run_store.forget_events(before=T0 + timedelta(minutes=1)) == 1
    assert await run_store.forget_events(before=T0 + timedelta(minutes=1)) == 0
    async with run_store.unit() as unit:
        assert await unit.first_time("Ev_old", T0 + timedelta(hours=3))  # forgotten: new again
        assert not await unit.first_time("Ev_new", T0 + timedelta(hours=3))  # kept


async def test_concurrent_first_time_exactly_one_is_first(run_store_factory: RunStoreFactory) -> None:
    stores = [await run_store_factory(), await run_store_factory()]
    for round_ in range(5):
        event_id = f"Ev_{round_}"
        results = await asyncio.gather(*(in_unit(stores[n % 2], lambda u: u.first_time(event_id, T0))
                                         for n in range(6)))
        assert results.count(True) == 1, round_
