"""Use case: Claude's note on a card, and its answers to a person's question in a card's thread.

Claude helps a person decide, never decides: what it writes is stored as text (`extra["ai_note"]`,
an `ai_answer` audit row) and shown labelled as generated; no decision, tier or check reads it.

The note (a tier with `note: true`, and ANTHROPIC_API_KEY set): once the card is posted and its ts
stored (the dispatcher's `on_card_stored`, in the process that posted it), a task of this process
computes the facts of history (bot/domain/unusual.py), asks the model, and writes the note with the
card's update in one guarded unit (the card's `chat.update` goes through the outbox). The card is
never held for it: a slow or failing model leaves the card as it was, with one log line. A note
that arrives after the request was decided is dropped.

A question ("why?") in a pending card's thread is answered from the request alone (its reason,
preview, parameters, the facts, and for Signoff's own runner the run's recent steps) by a model
call without tools: nothing is run and the agent is not resumed. The answer is posted in the thread
through the outbox, once per question (its dedupe key is the question's ts). Where the thread is
an agent's (a run's thread with an open `ask_human` question, or no pending card), the message is
left to the runner (bot/agent/run_service.py: answers and interventions).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any, Protocol

from bot.approvals.service import Service
from bot.domain.assist import (ANSWER_LIMIT, NOTE_KEY, Completion, ModelFailed, Prompt, answer_prompt, clean,
                               note_prompt, run_steps, wants_note)
from bot.domain.model import AuditEvent, Kind, Request
from bot.domain.runs import Gate
from bot.domain.unusual import Facts, unusual
from bot.domain.values import iso
from bot.outbox import effects
from bot.process.clock import Clock
from bot.process.metrics import Metrics
from storage.base import CardPosted
from storage.run_store import RunStore

log = logging.getLogger(__name__)

HISTORY_DAYS = 30
HISTORY_LIMIT = 200


class Model(Protocol):
    async def complete(self, prompt: Prompt) -> Completion: ...


class Assist:
    def __init__(self, service: Service, model: Model, metrics: Metrics, clock: Clock, *,
                 runs: RunStore | None = None, history_days: int = HISTORY_DAYS,
                 history_limit: int = HISTORY_LIMIT) -> None:
        self.service = service
        self.model = model
        self.metrics = metrics
        self.clock = clock
        self.runs = runs
        self.history_days = history_days
        self.history_limit = history_limit
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- the note -------------------------------------------------------------------------

    def card_stored(self, card: CardPosted, _at: datetime) -> None:
        """The dispatcher stored a card's ts (this process posted it): note it in the background."""
        self.spawn(self.add_note(card.request_id))

    async def add_note(self, request_id: str) -> bool:
        """Ask for the request's note and store it with the card's update; False: no note (and why is logged)."""
        request = await self.service.reads.request(request_id)
        if request is None or not wants_note(request):
            return False
        facts = await self.facts(request)
        done = await self._ask("note", request_id, note_prompt(request, facts))
        if done is None:
            return False
        text = clean(done.text)
        if not text:
            self._count("note", "empty")
            log.warning("AI note for %s: none (nothing left once links and mentions were taken out)", request_id)
            return False
        now = self.clock.now()
        note = {"text": text, "model": done.model, "at": iso(now)}

        async def change(unit: Any, current: Request) -> bool:
            if not wants_note(current):
                return False
            updated = current.evolve(extra={**current.extra, NOTE_KEY: note}, updated_at=now)
            await self.service.write(unit, updated, current)
            await unit.append_audit(AuditEvent(request_id, "ai_note", now, None, {
                "model": done.model, "input_tokens": done.input_tokens, "output_tokens": done.output_tokens}))
            await unit.enqueue(effects.update_card(request_id, f"card:{request_id}:ai_note", now))
            unit.after_commit(lambda: self.service.known.forget(request_id))
            return True

        result = await self.service.guarded(request_id, change)
        added = bool(result.ran and result.value)
        self._count("note", "added" if added else "late")
        return added

    async def facts(self, request: Request) -> Facts:
        since = self.clock.now() - timedelta(days=self.history_days)
        past = await self.service.store.approved_of_tool(request.action.name, since=since, limit=self.history_limit)
        approved = [r.decision.params if r.decision is not None else r.action.params for r in past]
        return unusual(request.action.name, request.action.params, approved, days=self.history_days)

    # -- questions in a card's thread -------------------------------------------------------

    async def asked_about(self, channel: str, thread_ts: str) -> Request | None:
        """The pending approval a question in this thread is about; None: the thread is not a pending
        card's, or it belongs to the agent (a run's open question, or a run waiting on no card)."""
        if self.runs is not None:
            run = await self.runs.find_run_by_root(channel, thread_ts)
            if run is not None:
                if run.status.is_final or await self.runs.open_requests(run.id, gate=Gate.QUESTION):
                    return None
                for request_id in reversed(await self.runs.open_requests(run.id, gate=Gate.ASK)):
                    request = await self.service.reads.request(request_id)
                    if request is not None and request.is_pending and request.kind is Kind.APPROVAL:
                        return request
                return None
        return await self.service.store.pending_approval_by_card(channel, thread_ts)

    def answer_later(self, request: Request, question: str, *, user_id: str, channel: str, thread_ts: str,
                     ts: str) -> None:
        self.spawn(self.answer(request, question, user_id=user_id, channel=channel, thread_ts=thread_ts, ts=ts))

    async def answer(self, request: Request, question: str, *, user_id: str, channel: str, thread_ts: str,
                     ts: str) -> bool:
        """Answer `question` (asked by `user_id` at `ts`) in the thread; False: no answer (logged)."""
        steps: list[str] = []
        run_id = request.extra.get("run_id")
        if self.runs is not None and isinstance(run_id, str):
            steps = run_steps({"role": m.role, "content": m.content} for m in await self.runs.messages(run_id))
        facts = await self.facts(request)
        done = await self._ask("answer", request.id, answer_prompt(request, question, facts, steps))
        if done is None:
            return False
        text = clean(done.text, limit=ANSWER_LIMIT, lines=8)
        if not text:
            self._count("answer", "empty")
            return False
        now = self.clock.now()
        async with self.service.store.unit() as unit:
            await unit.append_audit(AuditEvent(request.id, "ai_answer", now, user_id, {
                "question_ts": ts, "model": done.model, "input_tokens": done.input_tokens,
                "output_tokens": done.output_tokens}))
            await unit.enqueue(effects.assist_answer(request.id, channel, thread_ts, ts, user_id, text, now,
                                                     in_run=isinstance(run_id, str)))
        self._count("answer", "answered")
        return True

    # -- shared ---------------------------------------------------------------------------

    async def _ask(self, use: str, request_id: str, prompt: Prompt) -> Completion | None:
        try:
            done = await self.model.complete(prompt)
        except ModelFailed as exc:
            self._count(use, exc.reason)
            log.warning("AI %s for %s: none (%s)", use, request_id, exc)  # once: the client does not retry
            return None
        self.metrics.ai_tokens.labels(use, "input").inc(done.input_tokens)
        self.metrics.ai_tokens.labels(use, "output").inc(done.output_tokens)
        return done

    def _count(self, use: str, result: str) -> None:
        self.metrics.ai_calls.labels(use, result).inc()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _logged(self, work: Coroutine[Any, Any, Any]) -> None:
        try:
            await work
        except Exception:  # a bug here must not take anything else down; the card is unaffected
            log.exception("AI assistance failed")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)
        close = getattr(self.model, "close", None)
        if close is not None:
            await close()
