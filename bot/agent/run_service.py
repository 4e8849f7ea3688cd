"""Use cases on agent runs: start, cancel, a person's message in the thread, an answer to a question,
and taking over a failed run (retry, correct and retry, give up).

Called by the HTTP API, the Slack listeners and the CLI; the only caller of `RunStore`
outside the runner itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from bot.outbox import effects
from bot.approvals.access import GroupsUnknown
from bot.domain.questions import answers_from_text
from bot.agent.access import RunAccess
from bot.process.clock import Clock, new_id
from bot.domain.model import Actor, AuditEvent, Kind, Outcome, Request, Via
from bot.agent import blocks
from bot.domain.runs import Gate, Intervention, NewRun, Run, RunMessage, RunStatus, run_id_for
from bot.errors import InvalidInput, NotFound
from bot.approvals.checked import Recheck, decide_checked
from bot.approvals.service import DecideResult, Service
from bot.slack.text import groups_unknown_text
from bot.domain.wire import run_json
from storage.run_store import RunStore

log = logging.getLogger(__name__)
NOT_ASKED = "You are not one of the people asked, so your answer was not recorded."


@dataclass(frozen=True)
class ThreadReply:
    """What a person's message in a thread turned out to be."""

    kind: str  # "answer" | "intervention" | "duplicate" | "ended" | "refused" (not recorded as the answer:
    #          `refused` says why) | "ignored" | "not_writer" (may not write into this run: bot.agent.access)
    #          | "failed" (Signoff's thread, but handling the reply failed: logged, the person is told)
    run: Run | None = None
    request: Request | None = None
    refused: str | None = None


class RunService:
    def __init__(
        self,
        service: Service,
        runs: RunStore,
        *,
        clock: Clock,
        agents: set[str],
        kick: Callable[[str], None] = lambda _run_id: None,
        max_steps: int = 50,
    ) -> None:
        self.service = service
        self.runs = runs
        self.clock = clock
        self.access = RunAccess()  # who may write into a run (set by bot.agent.app)
        self.agents = agents
        self.kick = kick
        self.max_steps = max_steps  # SIGNOFF_RUN_MAX_STEPS: a retry gives a run this many more steps

    async def start(self, new: NewRun, *, owner: str | None = None, run_id: str | None = None) -> Run:
        """Store the run with its task as the first message and enqueue its root message.

        `owner`: the API token that started it (stored in its run_created audit row). `run_id`: a
        deterministic id (from an Idempotency-Key): a second start with it fails on the primary key."""
        if new.agent not in self.agents:
            raise InvalidInput(f"no agent named {new.agent!r} (known: {', '.join(sorted(self.agents))})",
                               details=[{"field": "agent", "message": "unknown agent"}])
        now = self.clock.now()
        run = Run(id=run_id or new_id("run"), status=RunStatus.RUNNING, task=new.task, channel=new.channel, agent=new.agent,
                  requested_by=new.requested_by, created_at=now, updated_at=now, next_seq=1)
        async with self.runs.unit() as unit:
            await unit.insert_run(run)
            await unit.append_messages([RunMessage(run.id, 0, "user", [{"type": "text", "text": new.task}], now)])
            created = {"agent": new.agent, "channel": new.channel, **({"api_token": owner} if owner else {})}
            await unit.append_audit(AuditEvent(run.id, "run_created", now, new.requested_by, created))
            await unit.enqueue(effects.post_root(run, now))
        return run

    async def find(self, run_id: str) -> Run | None:
        """The run, as committed (None: no such run)."""
        return await self.runs.get_run(run_id)

    async def start_keyed(self, new: NewRun, key: str, *, owner: str | None = None) -> tuple[Run, bool]:
        """`start` under the run id `key` names (bot.domain.runs.run_id_for): (the run, whether this call
        started it). A second start with the key, however late (a retried POST, a Slack command replayed
        after a crash that came after the run's commit), returns the run the first one stored."""
        run_id = run_id_for(key)
        existing = await self.runs.get_run(run_id)
        if existing is not None:
            return existing, False
        try:
            return await self.start(new, owner=owner, run_id=run_id), True
        except IntegrityError:  # a concurrent start with the same key won the insert
            return await self.get(run_id), False

    async def get(self, run_id: str) -> Run:
        run = await self.runs.get_run(run_id)
        if run is None:
            raise NotFound(f"no run with id {run_id!r}")
        return run

    async def cancel(self, run_id: str, *, by: str | None) -> tuple[Run, bool]:
        """Ask the run to stop at its next step boundary. Returns (run, whether this call asked)."""
        now = self.clock.now()
        async with self.runs.unit() as unit:
            asked = await unit.request_cancel(run_id, by)
            if asked:
                await unit.append_audit(AuditEvent(run_id, "cancel_requested", now, by, {}))
                await unit.enqueue(effects.update_root(run_id, now))
        if asked:
            self.kick(run_id)
        return await self.get(run_id), asked

    async def retry(self, run_id: str, *, by: str, by_name: str | None = None, correction: str | None = None,
                    seen: int | None = None) -> tuple[Run, bool]:
        """A person takes a failed run over: it goes on from where it stopped, with `correction` (their
        message) first when given. The messages and finished tool calls it has are kept: a call that
        finished never runs again (bot.agent.steps). A run that hit its step limit gets
        SIGNOFF_RUN_MAX_STEPS more. Returns (run, whether this call reopened it): of two clicks at
        once, one reopens it. `seen`: the failure the person was shown (the run's `retries` then): a
        click on an earlier failure's buttons reopens nothing."""
        run = await self.get(run_id)
        if run.status is not RunStatus.FAILED or run.root_ts is None or seen not in (None, run.retries):
            return run, False
        now = self.clock.now()
        text = (correction or "").strip()
        async with self.runs.unit() as unit:
            if not await unit.reopen(run.id, retries=run.retries, step_limit=run.step_count + self.max_steps, now=now):
                return await self.get(run_id), False
            if text:
                await unit.add_intervention(Intervention(run.id, text, by, now, by_name))
            await unit.append_audit(AuditEvent(run.id, "run_retried", now, by, {
                "corrected": bool(text), "after_steps": run.step_count, "error": run.error}))
            await unit.enqueue(effects.update_root(run.id, now))
            what = "with a correction" if text else "from where it stopped"
            note = blocks.note_message("🔁", f"{blocks.mention(by)} took the run over: it goes on {what}.",
                                       detail=text or None)
            await unit.enqueue(effects.note(run.id, f"retry:{run.retries + 1}", note, now))
        self.kick(run.id)
        return await self.get(run_id), True

    async def give_up(self, run_id: str, *, by: str) -> tuple[Run, bool]:
        """A person gives a failed run up: it is cancelled and can no longer be retried."""
        now = self.clock.now()
        async with self.runs.unit() as unit:
            closed = await unit.close_failed(run_id, by, now)
            if closed:
                await unit.append_audit(AuditEvent(run_id, "run_cancelled", now, by, {"after": "failed"}))
                await unit.enqueue(effects.update_root(run_id, now))
                await unit.enqueue(effects.note(run_id, "given_up", blocks.note_message(
                    "🚫", f"{blocks.mention(by)} gave the failed run up."), now))
        return await self.get(run_id), closed

    async def root_posted(self, run_id: str, ts: str) -> None:
        """The root message exists: store its ts (once) and let the run start."""
        async with self.runs.unit() as unit:
            stored = await unit.set_root(run_id, ts)
            if stored:
                await unit.append_audit(AuditEvent(run_id, "root_posted", self.clock.now(), None, {"ts": ts}))
        self.kick(run_id)

    async def root_failed(self, run_id: str, error: str) -> None:
        async with self.runs.unit() as unit:
            now = self.clock.now()
            await unit.fail_unstarted(run_id, f"could not post the run's message in Slack: {error}", now)
            # Every change appends an audit row: SQLite's cross-process wake-ups read them (bot.approvals.foreign_changes).
            await unit.append_audit(AuditEvent(run_id, "run_failed", now, None, {"error": error}))

    async def thread_reply(
        self, *, channel: str, thread_ts: str, user_id: str, user_name: str | None, text: str, ts: str | None,
        event_id: str | None,
    ) -> ThreadReply:
        """A person wrote in a thread: answer the open question there, or queue it for the run's next step."""
        run = await self.runs.find_run_by_root(channel, thread_ts)
        question_id = None
        if run is not None:
            questions = await self.runs.open_requests(run.id, gate=Gate.QUESTION)
            question_id = questions[0] if questions else None
        else:
            question_id = await self.runs.pending_question_by_card(channel, thread_ts)
            if question_id is None:
                return ThreadReply("ignored")
        # The thread is Signoff's: from here a failure is told to the person (a failure before, while
        # finding out, is not: it may be anyone's thread in any channel the bot is in).
        try:
            return await self._reply_in(run, question_id, user_id=user_id, user_name=user_name, text=text,
                                        ts=ts, event_id=event_id)
        except Exception:
            log.exception("a reply in the thread of %s could not be handled", run.id if run else question_id)
            return ThreadReply("failed", run)

    async def _reply_in(self, run: Run | None, question_id: str | None, *, user_id: str, user_name: str | None,
                        text: str, ts: str | None, event_id: str | None) -> ThreadReply:
        """`thread_reply` in a thread known to be a run's (`run`) or a question's (`question_id`)."""
        # An intervention's writer is checked before the unit: a user group's lookup is a Slack call, and
        # a unit holds the database's write lock (on SQLite, every write of the process waits behind it).
        refused = None
        if question_id is None and run is not None and not run.status.is_final:
            refused = await self._may_write(run, user_id)
        now = self.clock.now()
        async with self.runs.unit() as unit:
            if event_id is not None and not await unit.first_time(event_id, now):
                return ThreadReply("duplicate", run)
            if question_id is None:
                assert run is not None
                if run.status.is_final:
                    return ThreadReply("ended", run)
                if refused is not None:
                    return refused
                await unit.add_intervention(Intervention(run.id, text, user_id, now, user_name, ts))
                await unit.append_audit(AuditEvent(run.id, "intervention", now, user_id, {"ts": ts}))
                return ThreadReply("intervention", run)
        request = await self.service.get(question_id)
        result = await self.answer(request, answers_from_text(request, text), actor=Actor(user_id, user_name),
                                   via=Via.THREAD, recheck=self.asked(user_id))
        if result.refused is not None:
            return ThreadReply("refused", run, request, refused=result.refused)
        return ThreadReply("answer", run, result.request)

    async def _may_write(self, run: Run, user_id: str) -> ThreadReply | None:
        """Why `user_id` may not write into `run` (as the reply to give), or None: they may."""
        directory = self.service.directory
        try:
            if await self.access.may_write(run, user_id, directory.group_members if directory else None):
                return None
        except GroupsUnknown as exc:  # nothing written; the person is told to post it again
            return ThreadReply("refused", run, refused=groups_unknown_text(exc, "message"))
        return ThreadReply("not_writer", run)

    def asked(self, user_id: str) -> Recheck:
        """A person's answer is recorded only on a state of the question on which they are one of the
        people asked (bot/approvals/checked.py); otherwise they are told NOT_ASKED."""
        async def recheck(state: Request) -> str | None:
            try:
                return None if await self.service.may_decide(state, user_id) else NOT_ASKED
            except GroupsUnknown as exc:
                return groups_unknown_text(exc, "answer")
        return recheck

    async def answer(self, request: Request, answers: list[dict[str, Any]], *, actor: Actor, via: Via,
                     recheck: Recheck | None = None) -> DecideResult:
        """`recheck`: a person answers (checked on every state written on); None: the agent's token did."""
        if request.kind is not Kind.QUESTION:
            raise InvalidInput(f"{request.id} is not a question")
        if recheck is not None:
            return await decide_checked(self.service, request, recheck, Outcome.ANSWERED, via=via, actor=actor,
                                        params={"answers": answers})
        return await self.service.decide(request.id, Outcome.ANSWERED, via=via, actor=actor,
                                         params={"answers": answers})

    async def run_json(self, run: Run) -> dict[str, Any]:
        return run_json(run, await self.runs.executions(run.id))
