"""Submit: a new request checked by policy (bot/approvals/gate.py) and staged with its card, once per key.

An Idempotency-Key names one request: a repeated submit with the same body gets it back, with another
body an error; two submits racing with one key write one request (the store refuses the second key).
The per-token cap on pending requests counts what this process is writing as well as what is stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from bot.approvals.changes import RequestChanges
from bot.approvals.homes import home_candidates, user_ids
from bot.approvals.types import ApprovalSpec, StaleCheck
from bot.domain.grants import OWNER_KEY
from bot.domain.model import AuditEvent, Kind, Request
from bot.domain.timing import Timing
from bot.errors import IdempotencyMismatch, TooManyPending
from bot.outbox import effects
from storage.base import DuplicateIdempotencyKey, Expect, Unit


class SubmitGate(Protocol):
    """Policy at submit (bot/approvals/gate.py's PolicyGate): what to write for a spec, and writing it."""

    async def check(
        self, service: Submitting, spec: ApprovalSpec, *, idempotency_key: str | None = None,
        body_hash: str | None = None, verify_later: bool = False,
    ) -> Any: ...

    async def stage(self, service: Submitting, unit: Unit, checked: Any) -> None: ...

    async def write(self, service: Submitting, checked: Any) -> None:
        """`stage` in a unit of its own (Service.submit); returns once it committed."""

    async def recheck_edit(self, request: Request, params: dict[str, Any], *,
                           form_open: bool = True) -> str | None: ...


class Submitting(RequestChanges):
    """The submit use case (a part of `Service`)."""

    gate: SubmitGate | None  # policy, grants and delegation at submit (bot/approvals/gate.py)
    default_timing: Timing | None
    max_pending: int | None  # per API token (SIGNOFF_MAX_PENDING_PER_TOKEN); None: no cap
    _staging: Counter[str]  # per token: pending requests counted, not committed yet

    async def submit(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None,
        probe: bool = True,
    ) -> tuple[Request, bool]:
        """Store a new pending request and enqueue its card. Returns (request, created).

        `probe=False`: the key is most likely new (a Claude Code hook's call id), so it is not looked up
        first: the write itself finds a taken key (as it does when two submits race) and the request
        holding it is read then. Policy is evaluated before that write either way."""
        if idempotency_key is not None and probe:
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is not None:
                return existing, False
        try:
            try:
                request = await self._check_and_stage(spec, idempotency_key, body_hash, verify_later=True)
            except StaleCheck:  # the gate's cached view (a tool's grants) changed: check again, reading afresh
                request = await self._check_and_stage(spec, idempotency_key, body_hash, verify_later=False)
        except DuplicateIdempotencyKey:
            assert idempotency_key is not None
            existing = await self._idempotent(idempotency_key, body_hash)
            if existing is None:  # pragma: no cover - the key holder vanished: nothing deletes requests
                raise
            return existing, False
        return request, True

    async def _check_and_stage(self, spec: ApprovalSpec, idempotency_key: str | None, body_hash: str | None, *,
                               verify_later: bool) -> Request:
        """Policy's check of `spec` and its unit. `verify_later`: the gate may rely on what it cached and
        verify it in the unit (raising StaleCheck, the unit rolled back, when that was out of date)."""
        if self.gate is not None:
            checked = await self.gate.check(self, spec, idempotency_key=idempotency_key, body_hash=body_hash,
                                            verify_later=verify_later)
            request: Request | None = checked.request
            assert request is not None  # record_defaults: every evaluated API request is recorded
        else:
            request = self.new_request(spec, idempotency_key=idempotency_key, body_hash=body_hash)
        owner = request.extra.get(OWNER_KEY) if self.max_pending is not None and request.is_pending else None
        if owner is not None:
            self._staging[owner] += 1  # counted before the read: two submits at once both see each other
        try:
            if owner is not None:
                await self._within_cap(owner)
            if self.gate is not None:
                await self.gate.write(self, checked)
            else:
                async with self.store.unit() as unit:
                    await self.stage(unit, request, people=spec.approver_users)
        finally:
            if owner is not None:
                self._staging[owner] -= 1
                if not self._staging[owner]:
                    del self._staging[owner]
        return request

    async def _within_cap(self, owner: str) -> None:
        """TooManyPending unless the token `owner` has fewer than `max_pending` pending requests, those
        this process is writing right now included: in one process it is never passed (a request that
        commits meanwhile may be counted twice: the cap errs on the safe side). Behind N replicas it can be passed by what the others
        have in flight at that moment. A decision or a timeout frees a slot."""
        assert self.max_pending is not None
        # Read before the count: a request that commits meanwhile is then counted twice, never missed.
        others = self._staging[owner] - 1
        pending = await self.store.count_pending(owner) + others
        if pending >= self.max_pending:
            raise TooManyPending(
                f"this token has {pending} requests waiting for a person, the most it may have at once "
                f"({self.max_pending}); retry once some are decided, cancelled or timed out",
                details=[{"field": "Authorization", "message": f"at most {self.max_pending} pending requests per token"}])

    def new_request(
        self, spec: ApprovalSpec, *, idempotency_key: str | None = None, body_hash: str | None = None
    ) -> Request:
        """The pending request `spec` describes (not stored yet: see `stage`)."""
        return spec.pending(self.new_id("qst" if spec.kind is Kind.QUESTION else "apr"), self.clock.now(),
                            self.default_timing, idempotency_key=idempotency_key, body_hash=body_hash)

    async def stage(self, unit: Unit, request: Request, *, people: Iterable[str] = (),
                    expects: Sequence[Expect] = ()) -> None:
        """Write a new request, its audit row and its card post in `unit` (a caller's transaction),
        the unit's last write. `expects`: reads the caller relied on, verified with the write
        (Unit.insert_pending).

        Counting it and waking whoever waits happen when, and only if, that unit commits.
        """
        # App Home's per-user index: direct approvers and the members of listed user groups; a Home
        # refresh for those of them who have opened App Home. All of it in one statement on PostgreSQL.
        approvers = user_ids([*request.approvers, *people])
        post = effects.post_card(request.id, request.created_at)
        await unit.insert_pending(
            request,
            AuditEvent(request.id, "created", request.created_at, request.requested_by, {"risk": request.risk.value}),
            post, approvers,
            home_candidates(approvers, f"{request.id}:v{request.version}", request.created_at), expects=expects)
        counter = self.metrics.requests_created.labels(request.kind.value, request.risk.value)
        unit.after_commit(counter.inc)
        unit.after_commit(lambda: self.fresh.put(post.dedupe_key, request))  # the post renders it (bot/live/just_committed.py)
        unit.after_commit(lambda: self.known.put(request))
        self.touch(unit, request.id)

    async def _idempotent(self, key: str, body_hash: str | None) -> Request | None:
        async with self.store.unit() as unit:
            existing = await unit.find_by_idempotency_key(key)
        if existing is not None and existing.body_hash != body_hash:
            raise IdempotencyMismatch(
                f"Idempotency-Key {key!r} was already used for request {existing.id} with a different body"
            )
        return existing

    async def find_by_idempotency_key(self, key: str) -> Request | None:
        async with self.store.unit() as unit:
            return await unit.find_by_idempotency_key(key)

    async def recheck_edit(self, request: Request, params: dict[str, Any], *, form_open: bool = True) -> str | None:
        """Why an edit (already valid against the action's schema) may not be approved, or None.

        The gate re-evaluates the edited call under policy: an edit that turns the call into one a
        deny rule or a person's deny grant refuses is refused in the modal (before its ack), and again
        as the decision is written (`form_open=False`: the person is told, the form has closed). The
        policy in memory and the tool's cached grant index (its stamp read).
        """
        return await self.gate.recheck_edit(request, params, form_open=form_open) if self.gate is not None else None

