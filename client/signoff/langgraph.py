"""LangGraph and LangChain agents ask Signoff at an interrupt and resume from its decision.

Inside a node (LangGraph's own `interrupt()` underneath):

    from signoff.langgraph import approval, ask

    def send(state):
        decision = approval("send_email", {"to": state["to"]}, summary="Send the refund email")
        return {"sent": send_email(**decision.params)}      # the params as approved, maybe edited

In an `async def` node (a graph run with `ainvoke` / `astream`): `await aapproval(...)`, `await aask(...)`.

LangChain's `HumanInTheLoopMiddleware` needs nothing in the graph: `post_cards(graph, config)`
turns its interrupt into cards at once, and a `Resumer` (signoff.langgraph_resume) answers it;
`AsyncResumer` (signoff.langgraph_async) for graphs on an asyncio checkpointer.

Invariants:
- One interrupt, one request: the Idempotency-Key is derived from the thread id, the node's task
  (its checkpoint namespace, stable when the node replays on resume) and the interrupt's index
  in the node, so replay finds the request it made the first time and posts no second card.
- `approval()` always calls `interrupt()` (even when the request is already decided), so every
  replay of the node sees the same interrupts in the same order, as LangGraph requires.
- Fail closed: only an approved decision returns; every other ending raises `Rejected`,
  `Expired` or `Cancelled`; a resume value that is not this request's decision is checked
  against the server and, if the request is still pending there, raises.

LangGraph is imported lazily: importing this module needs only the `signoff` package.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from signoff._steps import Steps, arun, call, run
from signoff.client import given_or_default, raise_unless_approved
from signoff.errors import SignoffError
from signoff.langgraph_async import AsyncResumer
from signoff.langgraph_hitl import requests_for
from signoff.langgraph_keys import MARKER, interrupt_key, signoff_value
from signoff.langgraph_resume import Resumer, check_card
from signoff.models import Answers, Decision, final_decision

if TYPE_CHECKING:
    from signoff.client import AsyncSignoffClient, SignoffClient

__all__ = ["MARKER", "AsyncResumer", "Resumer", "aapproval", "aask", "apost_cards", "approval", "ask",
           "interrupt_key", "post_cards", "signoff_value"]


# -- where in the graph are we ------------------------------------------------------------

# Interrupt indexes per running task, keyed by the task's scratchpad (one per execution of a
# node, shared by everything the node calls, new on every replay). Bounded: entries of
# finished tasks are dropped oldest first.
_COUNTERS: OrderedDict[int, tuple[object, itertools.count[int]]] = OrderedDict()
_COUNTERS_MAX = 4096
_COUNTERS_LOCK = threading.Lock()


def _where() -> tuple[str, str, int]:
    """(thread id, task namespace, this call's index in the task) of the node calling us."""
    try:
        from langgraph.config import get_config
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SignoffError("signoff.langgraph needs langgraph: pip install 'signoff[langgraph]'") from exc
    try:
        conf = get_config().get("configurable") or {}
    except RuntimeError as exc:
        raise SignoffError("approval() and ask() must be called inside a LangGraph node") from exc
    thread_id = conf.get("thread_id")
    if thread_id is None:
        raise SignoffError("the graph runs without a thread_id: pass config={'configurable': {'thread_id': ...}} "
                           "and compile it with a checkpointer")
    scratchpad = conf.get("__pregel_scratchpad")
    if scratchpad is None:
        raise SignoffError("approval() and ask() must be called inside a LangGraph node (no task is running)")
    with _COUNTERS_LOCK:  # parallel branches run in threads
        slot = _COUNTERS.get(id(scratchpad))
        if slot is None or slot[0] is not scratchpad:
            slot = (scratchpad, itertools.count())
            _COUNTERS[id(scratchpad)] = slot
            while len(_COUNTERS) > _COUNTERS_MAX:
                _COUNTERS.popitem(last=False)
        index = next(slot[1])
    return str(thread_id), str(conf.get("checkpoint_ns") or ""), index


@asynccontextmanager
async def _aclient(client: AsyncSignoffClient | None) -> AsyncIterator[AsyncSignoffClient]:
    if client is not None:
        yield client
        return
    from signoff.client import AsyncSignoffClient

    async with AsyncSignoffClient() as made:
        yield made


def _interrupt(value: dict[str, Any]) -> Any:
    from langgraph.types import interrupt

    return interrupt(value)


def _answer(resumed: Any, request_id: str) -> Steps[dict[str, Any]]:
    """The ended request's JSON: the resume value when it is this request's, else the server's word."""
    if isinstance(resumed, Mapping) and resumed.get("id") == request_id and final_decision(resumed) is not None:
        return dict(resumed)
    body = yield call("client", "get", request_id)
    if final_decision(body) is None:
        raise SignoffError(f"the graph was resumed before anyone decided {request_id}; it stays unapproved",
                           request_id=request_id)
    return dict(body)


def _approval(action: str, params: Mapping[str, Any], summary: str | None, **options: Any) -> Steps[Decision]:
    """approval()'s steps (signoff._steps): submit, interrupt, and on the replay read the decision."""
    thread_id, namespace, index = _where()
    submitted = yield call("client", "submit", action, params, summary=summary or f"Run {action}",
                           idempotency_key=interrupt_key("approval", thread_id, namespace, index), **options)
    resumed = _interrupt(signoff_value("approval", submitted.body))
    decision = Decision.from_request((yield from _answer(resumed, submitted.id)))
    assert decision is not None
    return raise_unless_approved(decision)


def _ask(questions: Sequence[Mapping[str, Any]], **options: Any) -> Steps[Answers]:
    thread_id, namespace, index = _where()
    submitted = yield call("client", "submit_questions", questions,
                           idempotency_key=interrupt_key("question", thread_id, namespace, index), **options)
    resumed = _interrupt(signoff_value("question", submitted.body))
    answered = yield from _answer(resumed, submitted.id)
    raise_unless_approved(final_decision(answered))  # type: ignore[arg-type]  # _answer checked it is final
    return Answers.from_question(answered)


def _cards(state: Any, config: Mapping[str, Any], card: Mapping[str, Any]) -> Steps[list[str]]:
    thread_id = str(config["configurable"]["thread_id"])
    ids: list[str] = []
    for item in state.interrupts:
        ids.extend((yield from requests_for(thread_id, item, check_card(card))) or [])
    return ids


# -- in a node ----------------------------------------------------------------------------


def approval(action: str, params: Mapping[str, Any], *, summary: str | None = None,
             client: SignoffClient | None = None, preview: Mapping[str, Any] | None = None, risk: str | None = None,
             params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
             approvers: Sequence[str] | None = None, context: str | None = None,
             requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
             allowed_decisions: Sequence[str] | None = None, callback_url: str | None = None) -> Decision:
    """Ask for approval of `action(params)` from inside a node; pause the graph until a person decides.

    The node must propose the same action each time it runs (it replays on resume): the request is
    found again by its key, and a different body under that key is refused (`SignoffRequestError`).
    Returns the approved `Decision` (run with `decision.params`: a person may have edited them);
    raises `Rejected` (`.reason`, `.decision.reply` for "Reply instead"), `Expired` or `Cancelled`.
    The first run posts the card and interrupts; whoever resumes the thread (a `Resumer`, or your
    own `graph.invoke(Command(resume=...))` with the request's JSON) brings the decision back here.
    `callback_url`: where Signoff POSTs the decision (a resumer's `WebhookReceiver.url`, which it wakes).
    In an `async def` node, `await aapproval(...)` (the same, on an `AsyncSignoffClient`).
    """
    with given_or_default(client) as signoff:
        return run(_approval(action, params, summary, preview=preview, risk=risk, params_schema=params_schema,
                             channel=channel, approvers=approvers, context=context, requested_by=requested_by,
                             timing=timing, allowed_decisions=allowed_decisions, callback_url=callback_url),
                   {"client": signoff})


async def aapproval(action: str, params: Mapping[str, Any], *, summary: str | None = None,
                    client: AsyncSignoffClient | None = None, preview: Mapping[str, Any] | None = None,
                    risk: str | None = None, params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
                    approvers: Sequence[str] | None = None, context: str | None = None,
                    requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
                    allowed_decisions: Sequence[str] | None = None, callback_url: str | None = None) -> Decision:
    """`approval()` for `async def` nodes (graphs run with `ainvoke` / `astream`)."""
    async with _aclient(client) as signoff:
        return await arun(_approval(action, params, summary, preview=preview, risk=risk, params_schema=params_schema,
                                    channel=channel, approvers=approvers, context=context, requested_by=requested_by,
                                    timing=timing, allowed_decisions=allowed_decisions, callback_url=callback_url),
                          {"client": signoff})


def ask(questions: Sequence[Mapping[str, Any]], *, summary: str | None = None, client: SignoffClient | None = None,
        context: str | None = None, channel: str | None = None, approvers: Sequence[str] | None = None,
        requested_by: str | None = None, callback_url: str | None = None) -> Answers:
    """Ask people 1-4 multiple-choice questions from inside a node; the `Answers` once someone answers."""
    with given_or_default(client) as signoff:
        return run(_ask(questions, summary=summary, context=context, channel=channel, approvers=approvers,
                        requested_by=requested_by, callback_url=callback_url), {"client": signoff})


async def aask(questions: Sequence[Mapping[str, Any]], *, summary: str | None = None,
               client: AsyncSignoffClient | None = None, context: str | None = None, channel: str | None = None,
               approvers: Sequence[str] | None = None, requested_by: str | None = None,
               callback_url: str | None = None) -> Answers:
    """`ask()` for `async def` nodes."""
    async with _aclient(client) as signoff:
        return await arun(_ask(questions, summary=summary, context=context, channel=channel, approvers=approvers,
                               requested_by=requested_by, callback_url=callback_url), {"client": signoff})


def post_cards(graph: Any, config: Mapping[str, Any], *, client: SignoffClient | None = None,
               **card: Any) -> list[str]:
    """Post the cards for every interrupt a thread is paused at now; the request ids (idempotent).

    `approval()`/`ask()` post their own cards; this is for interrupts Signoff did not raise, such as
    LangChain's HumanInTheLoopMiddleware. `card`: channel, approvers, risk, requested_by, timing,
    callback_url, as a `Resumer` of the thread is given (the same options, or its submit is refused
    as a different body).
    """
    with given_or_default(client) as signoff:
        return run(_cards(graph.get_state(config), config, card), {"client": signoff})


async def apost_cards(graph: Any, config: Mapping[str, Any], *, client: AsyncSignoffClient | None = None,
                      **card: Any) -> list[str]:
    """`post_cards` for a graph on an asyncio checkpointer."""
    async with _aclient(client) as signoff:
        return await arun(_cards(await graph.aget_state(config), config, card), {"client": signoff})
