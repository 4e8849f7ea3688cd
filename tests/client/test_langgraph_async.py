"""Async LangGraph graphs (`async def` nodes, `astream` / `ainvoke`, AsyncSqliteSaver and AsyncPostgresSaver),
decided in Slack and resumed by an `AsyncResumer` whose claims the Signoff server holds.

Real langgraph and its real asyncio checkpointers, the running Signoff, the fake Slack with signed clicks.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.sandbox.signed import plain_input
from signoff import AsyncSignoffClient
from signoff.langgraph import AsyncResumer, apost_cards
from tests.support.databases import empty_pg_database
from tests.client.lg_async_graphs import async_graph, async_question_graph
from tests.client.lg_graphs import calls, hitl_agent
from tests.client.test_langgraph import CARD, answer_production_once_waited, decided, lg_env, submit_modal, thread
from tests.support.app import API_TOKEN, App

__all__ = ["lg_env"]  # a fixture, used by name


@pytest_asyncio.fixture
async def aclient(app: App) -> AsyncIterator[AsyncSignoffClient]:
    async with AsyncSignoffClient(app.url, API_TOKEN) as opened:
        yield opened


@contextlib.asynccontextmanager
async def sqlite_saver(path: Path) -> AsyncIterator[Any]:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver


@pytest_asyncio.fixture
async def pg_checkpoints() -> AsyncIterator[str]:
    """A PostgreSQL database of its own for LangGraph's checkpoints (beside Signoff's)."""
    async with empty_pg_database("lg_ckpt") as url:
        yield url


async def claim_of(app: App, key: str) -> dict[str, Any]:
    status, body = await app.api("GET", f"/api/v1/resumes/{quote(key, safe='')}")
    assert status == 200, body
    return dict(body)


async def paused_by_astream(graph: Any, inputs: Any, config: dict[str, Any]) -> Any:
    """Start the graph with `astream` (updates): the interrupt it stops at."""
    seen = [chunk async for chunk in graph.astream(inputs, config, stream_mode="updates")]
    [stop] = [c["__interrupt__"] for c in seen if "__interrupt__" in c]
    return stop[0]


async def edit_and_resume(app: App, graph: Any, saver: Any, aclient: AsyncSignoffClient, config: dict[str, Any],
                          **resumer: Any) -> tuple[str, list[str]]:
    """The started thread's card edited in Slack (subject), then one AsyncResumer round: (request id, resumed)."""
    paused = (await graph.aget_state(config)).interrupts[0]
    request_id = paused.value["signoff"]["request_id"]
    await submit_modal(app, request_id, "signoff_edit", {"p:to": {"value": plain_input("c@example.com")},
                                                         "p:subject": {"value": plain_input("Your refund of $45")}})
    return request_id, await AsyncResumer(async_graph, saver, client=aclient, **resumer).resume_ready()


async def test_an_async_graph_started_with_astream_resumes_with_the_edit(
        app: App, lg_env: dict[str, str], tmp_path: Path, aclient: AsyncSignoffClient) -> None:
    config = thread("async-1")
    async with sqlite_saver(tmp_path / "checkpoints.db") as saver:
        graph = async_graph(saver)
        paused = await paused_by_astream(graph, {"to": "c@example.com"}, config)
        assert paused.value["action"] == {"name": "send_email",
                                          "params": {"to": "c@example.com", "subject": "Your refund"}}
        request_id, resumed = await edit_and_resume(app, graph, saver, aclient, config)
        assert resumed == ["async-1"]
        state = await graph.aget_state(config)
        assert state.next == () and state.values["sent"] == "sent to c@example.com: Your refund of $45"
        assert calls() == [{"tool": "send_email", "args": {"to": "c@example.com", "subject": "Your refund of $45"}}]
        claim = await claim_of(app, state.metadata["signoff_resume"])
        assert claim["state"] == "done" and claim["request_ids"] == [request_id]
        assert await AsyncResumer(async_graph, saver, client=aclient).resume_ready() == []  # never again
    assert len(calls()) == 1 and len(app.slack.calls_to("chat.postMessage")) == 1  # the replay found its card


async def test_two_async_resumers_on_one_decision_resume_once(
        app: App, lg_env: dict[str, str], tmp_path: Path, aclient: AsyncSignoffClient) -> None:
    config = thread("async-2")
    async with sqlite_saver(tmp_path / "checkpoints.db") as first, sqlite_saver(tmp_path / "checkpoints.db") as second:
        result = await async_graph(first).ainvoke({"to": "d@example.com"}, config)
        request_id = result["__interrupt__"][0].value["signoff"]["request_id"]
        await app.click(request_id, "U1", user_name="alice")
        await decided(app, request_id)
        # Two resumers, each with its own connection to the checkpoints (as two processes would have).
        outcomes = await asyncio.gather(*(AsyncResumer(async_graph, saver, client=aclient).resume_ready()
                                          for saver in (first, second)))
        assert sorted(outcomes) == [[], ["async-2"]]
    assert calls() == [{"tool": "send_email", "args": {"to": "d@example.com", "subject": "Your refund"}}]


async def test_a_running_async_resumer_is_woken_by_the_answer_to_aask(
        app: App, lg_env: dict[str, str], tmp_path: Path, aclient: AsyncSignoffClient) -> None:
    config = thread("async-ask")
    async with sqlite_saver(tmp_path / "checkpoints.db") as saver:
        result = await async_question_graph(saver).ainvoke({}, config)
        question_id = result["__interrupt__"][0].value["signoff"]["request_id"]
        # A long scan interval: only the long-poll's push can wake the resumer in time for this test.
        resumer = AsyncResumer(async_question_graph, saver, client=aclient, scan_every=60)
        stop = asyncio.Event()
        running = asyncio.create_task(resumer.run(stop=stop))
        try:
            await answer_production_once_waited(app, question_id, resumer)
        finally:
            stop.set()
            await resumer.aclose()  # its long-polls end with it
            await asyncio.wait_for(running, 10)


async def test_the_hitl_middleware_under_ainvoke_and_apost_cards(
        app: App, lg_env: dict[str, str], tmp_path: Path, aclient: AsyncSignoffClient) -> None:
    config = thread("async-agent")
    async with sqlite_saver(tmp_path / "checkpoints.db") as saver:
        agent = hitl_agent(saver)
        await agent.ainvoke({"messages": [{"role": "user", "content": "tidy up"}]}, config)
        [batch_id] = await apost_cards(agent, config, client=aclient, **CARD)
        assert await apost_cards(agent, config, client=aclient, **CARD) == [batch_id]  # idempotent
        _, batch = await app.api("POST", f"/api/v1/approvals/{batch_id}/cancel", json={"reason": "not today"})
        assert batch["status"] == "cancelled"
        assert await AsyncResumer(hitl_agent, saver, client=aclient, **CARD).resume_ready() == ["async-agent"]
        final = (await agent.aget_state(config)).values["messages"][-1]
    assert calls() == []  # cancelled: neither tool ran, each got a rejection
    assert "send_email[error]" in final.content and "nobody approved it in Slack" in final.content


async def test_bad_resumer_options_are_refused_at_once(app: App, tmp_path: Path, aclient: AsyncSignoffClient) -> None:
    from signoff import SignoffClient, SignoffError

    async with sqlite_saver(tmp_path / "checkpoints.db") as saver:
        with pytest.raises(SignoffError, match="claims= is gone"):
            AsyncResumer(async_graph, saver, client=aclient, claims=object())
        with pytest.raises(SignoffError, match="unknown option.*chanel"):
            AsyncResumer(async_graph, saver, client=aclient, chanel="C1")
        with pytest.raises(SignoffError, match="lease_seconds must be 5 to 3600"):
            AsyncResumer(async_graph, saver, client=aclient, lease_seconds=1)
        with SignoffClient(app.url, API_TOKEN) as blocking, pytest.raises(SignoffError, match="AsyncSignoffClient"):
            AsyncResumer(async_graph, saver, client=blocking)  # type: ignore[arg-type]


@pytest.mark.postgres_only
async def test_an_async_graph_on_async_postgres_saver(app: App, lg_env: dict[str, str], pg_checkpoints: str,
                                                      aclient: AsyncSignoffClient) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    config = thread("async-pg")
    async with AsyncPostgresSaver.from_conn_string(pg_checkpoints) as saver:
        await saver.setup()
        graph = async_graph(saver)
        assert await AsyncResumer(async_graph, saver, client=aclient).threads() == {}
        await graph.ainvoke({"to": "c@example.com"}, config)
        assert list(await AsyncResumer(async_graph, saver, client=aclient).threads()) == ["async-pg"]
        _, resumed = await edit_and_resume(app, graph, saver, aclient, config)
        assert resumed == ["async-pg"]
        assert (await graph.aget_state(config)).values["sent"] == "sent to c@example.com: Your refund of $45"
    assert len(calls()) == 1

