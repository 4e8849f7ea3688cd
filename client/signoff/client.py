"""`SignoffClient` and `AsyncSignoffClient`: ask a person in Slack and get their decision back.

Invariants:
- One call, one card: `request_approval` / `submit` / `ask` send one Idempotency-Key (given, or made
  once per call) on every retry, so a submit whose response was lost is retried without a second card.
- Waiting is long-polling the same request id; a dropped connection or a 5xx reconnects to that
  request (never resubmits), with backoff, for up to `retry_for` seconds of consecutive failures,
  then raises `SignoffUnavailable`. No loop here asks faster than `signoff._pace` allows: a poll
  back early while still pending, a 5xx, a refused connection or a 429 (whatever its Retry-After)
  is followed by a pause, never at once.
- A request whose card Slack refused for good (the server's `delivery.status` is `failed`) ends
  every wait with `UndeliverableError`: nobody can see it, so waiting on would wait for nothing.
  `request_approval` and `ask` cancel it first (they made it; nobody should approve it later).
- Only an approved `Decision` is ever returned by `request_approval`; every other ending raises
  (`Rejected`, `Expired`, `Cancelled`), and when the caller's own `timeout` runs out the request is
  cancelled on the server first (so nobody approves something no one waits for) and `Expired` raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx2

import signoff._protocol as p
import signoff.resumes as rs
from signoff.policy_check import AsyncPolicyCalls, PolicyCalls
from signoff.receipts import AsyncOutcomeCalls, OutcomeCalls
import signoff.signatures as sig
from signoff._bound import Keys, checked, ended
from signoff._pace import FIRST_BACKOFF, PollPace, next_backoff, retry_pause
from signoff.errors import Cancelled, Expired, Rejected, SignoffUnavailable, StillPending, UndeliverableError
from signoff.models import Answers, Decision, final_decision

Json = dict[str, Any]
log = logging.getLogger("signoff")


_FAILING: set[str] = set()  # servers whose last call failed (said once, until a call to them succeeds)


def _retrying(url: str, method: str, path: str, problem: str, retry_for: float,
              response: httpx2.Response | None) -> None:
    """Said at a server's first failure, once until a call to it succeeds again: a script waiting on a
    server that is down says so at once instead of after `retry_for` seconds of silence (a WARNING: Python
    shows it even unconfigured). A 429 is the server answering "later", not a failure: nothing is said."""
    if (response is not None and response.status_code == 429) or url in _FAILING:
        return
    _FAILING.add(url)
    log.warning("Signoff at %s did not answer %s %s (%s); trying again for up to %gs", url, method, path,
                problem, retry_for)


def _answered(url: str) -> None:
    _FAILING.discard(url)


def _give_up(started: float, pause: float, retry_for: float) -> bool:
    return time.monotonic() - started + pause > retry_for


def _timed_out_message(timeout: float | None) -> str:
    return f"no decision within {timeout:g}s; the request was cancelled"


def _unavailable(url: str, method: str, path: str, problem: str, response: httpx2.Response | None) -> str:
    asked = response.headers.get("Retry-After") if response is not None else None
    later = f" (its last answer said Retry-After: {asked})" if asked else ""
    return f"Signoff at {url} did not answer {method} {path}: {problem}{later}"


def raise_unless_approved(decision: Decision) -> Decision:
    """Return an approved (or answered) decision; raise the error that says how it ended otherwise."""
    who = decision.decider
    if decision.outcome in ("approved", "answered"):
        return decision
    if decision.outcome == "rejected":
        reason = f": {decision.comment}" if decision.comment else ""
        raise Rejected(f"rejected by {who or 'a person'}{reason}", decision=decision)
    if decision.outcome == "expired":
        raise Expired(decision.comment or "no decision in time; the request expired", decision=decision)
    if decision.outcome == "cancelled":
        raise Cancelled(decision.comment or "the request was cancelled", decision=decision)
    raise Rejected(f"the request ended as {decision.outcome}", decision=decision)


@dataclass(frozen=True)
class Submission:
    """A submitted request: its `id`, the server's JSON, and whether this call created it."""

    id: str
    body: Json
    created: bool
    client: SignoffClient
    key: str | None = None  # the Idempotency-Key it was submitted under (its decision must be signed for it)

    @property
    def decision(self) -> Decision | None:
        """Set at once when the request already ended (a policy or an earlier identical submit)."""
        return checked(self.body, self.key)

    def wait(self, timeout: float | None = None) -> Decision:
        return self.client.wait(self.id, timeout)

    def cancel(self, reason: str | None = None) -> Decision:
        return self.client.cancel(self.id, reason)


@dataclass(frozen=True)
class AsyncSubmission:
    """The async twin of `Submission`."""

    id: str
    body: Json
    created: bool
    client: AsyncSignoffClient
    key: str | None = None

    @property
    def decision(self) -> Decision | None:
        return checked(self.body, self.key)

    async def wait(self, timeout: float | None = None) -> Decision:
        return await self.client.wait(self.id, timeout)

    async def cancel(self, reason: str | None = None) -> Decision:
        return await self.client.cancel(self.id, reason)


class SignoffClient(rs.ResumeCalls, OutcomeCalls, PolicyCalls):
    """Blocking client. `url`/`token` default to SIGNOFF_URL / SIGNOFF_TOKEN."""

    def __init__(self, url: str | None = None, token: str | None = None, *, retry_for: float | None = None,
                 http: httpx2.Client | None = None) -> None:
        self.config = p.Config.resolve(url, token, retry_for)
        self._keys = Keys()
        self._http = http or httpx2.Client(headers=self.config.headers(), trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SignoffClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the calls ------------------------------------------------------------

    def request_approval(self, action: str, params: Mapping[str, Any], *, summary: str,
                         preview: Mapping[str, Any] | None = None, risk: str | None = None,
                         params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
                         approvers: Sequence[str] | None = None, timeout: float | None = None,
                         idempotency_key: str | None = None, context: str | None = None,
                         requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
                         suggestions: Sequence[Mapping[str, Any]] | None = None,
                         session: str | None = None, state: str | None = None) -> Decision:
        """Submit once and wait: the approved `Decision` (run with its `params`), or an error saying why not."""
        handle = self.submit(action, params, summary=summary, preview=preview, risk=risk,
                             params_schema=params_schema, channel=channel, approvers=approvers,
                             idempotency_key=idempotency_key, context=context, requested_by=requested_by,
                             timing=timing, suggestions=suggestions, session=session, state=state)
        return raise_unless_approved(self._wait_or_cancel(handle.id, timeout))

    def submit(self, action: str, params: Mapping[str, Any], *, summary: str,
               preview: Mapping[str, Any] | None = None, risk: str | None = None,
               params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
               approvers: Sequence[str] | None = None, idempotency_key: str | None = None,
               context: str | None = None, requested_by: str | None = None,
               timing: Mapping[str, Any] | None = None,
               allowed_decisions: Sequence[str] | None = None,
               suggestions: Sequence[Mapping[str, Any]] | None = None,
               session: str | None = None, callback_url: str | None = None,
               state: str | None = None) -> Submission:
        """Create the request (or find the one this key already made) without waiting.

        `suggestions`: Claude's permission updates for this call (offered on the card as "Approve &
        always allow ..."); `session`: the agent's run or session id, for session-scoped grants;
        `callback_url`: where the server POSTs the decision, signed (`signoff.webhooks.read` checks it;
        the server needs SIGNOFF_WEBHOOK_SECRET set, or the submit is refused); `state`: what the
        preview was computed from (a hash, an etag), carried back as `Decision.state` to re-check."""
        body = p.approval_body(action, params, summary=summary, preview=preview, risk=risk,
                               params_schema=params_schema, channel=channel, approvers=approvers,
                               context=context, requested_by=requested_by, timing=timing,
                               allowed_decisions=allowed_decisions, suggestions=suggestions, session=session,
                               callback_url=callback_url, state=state)
        key = idempotency_key or p.new_key()
        answer, status = self._send("POST", "/api/v1/approvals", json=body, key=key)
        return Submission(str(answer["id"]), answer, status == 201, self, self._keys.note(str(answer["id"]), key))

    def submit_batch(self, items: Sequence[Mapping[str, Any]], *, summary: str, risk: str | None = None,
                     channel: str | None = None, approvers: Sequence[str] | None = None,
                     idempotency_key: str | None = None, context: str | None = None,
                     requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
                     callback_url: str | None = None, session: str | None = None) -> Submission:
        """Several actions on one card, each decided on its own (`Decision.items`), without waiting.

        `items`: {name, params, params_schema?, preview?, allowed_decisions?, key?} each (`key`: the
        agent's id for the action, which its execution receipt names as `item`).
        """
        body = p.batch_body(items, summary=summary, risk=risk, channel=channel, approvers=approvers,
                            context=context, requested_by=requested_by, timing=timing, callback_url=callback_url,
                            session=session)
        key = idempotency_key or p.new_key()
        answer, status = self._send("POST", "/api/v1/approvals", json=body, key=key)
        return Submission(str(answer["id"]), answer, status == 201, self, self._keys.note(str(answer["id"]), key))

    def ask(self, questions: Sequence[Mapping[str, Any]], *, summary: str | None = None,
            context: str | None = None, channel: str | None = None, approvers: Sequence[str] | None = None,
            timeout: float | None = None, idempotency_key: str | None = None,
            requested_by: str | None = None) -> Answers:
        """Ask 1-4 multiple-choice questions (2-4 options each); the answers once someone gives them."""
        body = p.question_body(questions, summary=summary, context=context, channel=channel,
                               approvers=approvers, requested_by=requested_by)
        key = idempotency_key or p.new_key()
        answer, _ = self._send("POST", "/api/v1/questions", json=body, key=key)
        self._keys.note(str(answer["id"]), key)
        decision = raise_unless_approved(self._wait_or_cancel(str(answer["id"]), timeout))
        return Answers.from_question(self.get(decision.request_id))

    def submit_questions(self, questions: Sequence[Mapping[str, Any]], *, summary: str | None = None,
                         context: str | None = None, channel: str | None = None,
                         approvers: Sequence[str] | None = None, idempotency_key: str | None = None,
                         requested_by: str | None = None, callback_url: str | None = None) -> Submission:
        """Post the questions (or find the ones this key already posted) without waiting."""
        body = p.question_body(questions, summary=summary, context=context, channel=channel,
                               approvers=approvers, requested_by=requested_by, callback_url=callback_url)
        key = idempotency_key or p.new_key()
        answer, status = self._send("POST", "/api/v1/questions", json=body, key=key)
        return Submission(str(answer["id"]), answer, status == 201, self, self._keys.note(str(answer["id"]), key))

    def get(self, request_id: str, *, wait: float = 0.0) -> Json:
        """The request's JSON as the server has it; with `wait`, one long-poll (at most 50 s)."""
        wait = max(0.0, min(wait, p.MAX_LONG_POLL))
        path = p.item_path(request_id) + (f"?wait={wait:g}" if wait else "")
        return self._send("GET", path, timeout=p.wait_timeout(wait))[0]

    def find(self, idempotency_key: str) -> Json | None:
        """The request submitted under `idempotency_key`, or None."""
        items = self._send("GET", "/api/v1/approvals?" + urlencode({"idempotency_key": idempotency_key}))[0]
        return items["items"][0] if items.get("items") else None

    def decision(self, request_id: str, timeout: float | None = None) -> Decision | None:
        """The final decision whatever it is, or None if still pending when `timeout` runs out (None: wait on).

        Raises `UndeliverableError` when Slack refused the request's card for good (nobody can decide it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pace = PollPace()
        while True:
            left = p.MAX_LONG_POLL if deadline is None else deadline - time.monotonic()
            asked, sent = max(0.0, min(left, p.MAX_LONG_POLL)), time.monotonic()
            found = ended(self.get(request_id, wait=asked), request_id, self._keys.of(request_id))
            now = time.monotonic()
            if found is not None or (deadline is not None and now >= deadline):
                return found
            pause = pace.pause(asked, now - sent)
            time.sleep(pause if deadline is None else min(pause, deadline - now))

    def wait(self, request_id: str, timeout: float | None = None) -> Decision:
        """The approved decision; `Rejected`/`Expired`/`Cancelled` otherwise; `StillPending` after `timeout`;
        `UndeliverableError` if its card could not be posted (the request is left as it is)."""
        found = self.decision(request_id, timeout)
        if found is None:
            raise StillPending(f"{request_id} is still pending after {timeout:g}s", request_id=request_id)
        return raise_unless_approved(found)

    def cancel(self, request_id: str, reason: str | None = None) -> Decision:
        """Withdraw a pending request; if someone decided first, their decision (not an error)."""
        body, _ = self._send("POST", p.item_path(request_id).replace("/questions/", "/approvals/") + "/cancel",
                             json={"reason": reason} if reason else {}, allow_conflict=True)
        found = final_decision(body.get("request", body))
        assert found is not None, body  # a cancel answers with an ended request
        return found

    # -- plumbing ---------------------------------------------------------------

    def _wait_or_cancel(self, request_id: str, timeout: float | None) -> Decision:
        try:
            found = self.decision(request_id, timeout)
        except UndeliverableError as exc:
            found = self.cancel(request_id, exc.cancel_reason)
            if found.outcome == "cancelled":
                raise exc.cancelled() from None
            return found  # decided (from the App Home, say) before the cancel: that decision stands
        if found is not None:
            return found
        found = self.cancel(request_id, _timed_out_message(timeout))
        if found.outcome == "cancelled":
            raise Expired(_timed_out_message(timeout), decision=found)
        return found  # decided just before the cancel: that decision stands

    def trust_server_key(self) -> None:
        """Pin the server's decision-signing key now (once per process and URL: what the first call does),
        so that a decision that reaches this process another way (a webhook, a recorded message) is checked."""
        if sig.keyring().wants_fetch(self.config.url):
            sig.keyring().pin(self.config.url, self._send("GET", sig.KEYS_PATH)[0])

    def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
              timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        if path != sig.KEYS_PATH and sig.keyring().wants_fetch(self.config.url):  # first (and stale): the server's keys
            sig.keyring().pin(self.config.url, self._send("GET", sig.KEYS_PATH)[0])
        headers = {"Idempotency-Key": key} if key else None
        started, backoff = time.monotonic(), FIRST_BACKOFF
        while True:
            response = None
            try:
                response = self._http.request(method, self.config.url + path, json=json, headers=headers,
                                              timeout=timeout or p.wait_timeout(0))
                if not p.retryable(response):
                    _answered(self.config.url)
                    body = p.read_json(response, allow_conflict=allow_conflict)
                    if path != sig.KEYS_PATH and sig.keyring().wants_refresh(self.config.url, body):
                        # A key this process does not know yet (a rotation): read the keys again (bounded).
                        sig.keyring().pin(self.config.url, self._send("GET", sig.KEYS_PATH)[0])
                    return body, response.status_code
                problem = f"HTTP {response.status_code}"
            except httpx2.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            pause = retry_pause(response, backoff)
            if _give_up(started, pause, self.config.retry_for):
                raise SignoffUnavailable(_unavailable(self.config.url, method, path, problem, response))
            _retrying(self.config.url, method, path, problem, self.config.retry_for, response)
            time.sleep(pause)  # backoff between retries of a failed call, not a poll: waiting is the long-poll
            backoff = next_backoff(backoff)


class AsyncSignoffClient(rs.AsyncResumeCalls, AsyncOutcomeCalls, AsyncPolicyCalls):
    """The asyncio client; the same calls as `SignoffClient`, awaited."""

    def __init__(self, url: str | None = None, token: str | None = None, *, retry_for: float | None = None,
                 http: httpx2.AsyncClient | None = None) -> None:
        self.config = p.Config.resolve(url, token, retry_for)
        self._keys = Keys()
        self._http = http or httpx2.AsyncClient(headers=self.config.headers(), trust_env=False)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSignoffClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request_approval(self, action: str, params: Mapping[str, Any], *, summary: str,
                               preview: Mapping[str, Any] | None = None, risk: str | None = None,
                               params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
                               approvers: Sequence[str] | None = None, timeout: float | None = None,
                               idempotency_key: str | None = None, context: str | None = None,
                               requested_by: str | None = None,
                               timing: Mapping[str, Any] | None = None,
                               suggestions: Sequence[Mapping[str, Any]] | None = None,
                               session: str | None = None, state: str | None = None) -> Decision:
        handle = await self.submit(action, params, summary=summary, preview=preview, risk=risk,
                                   params_schema=params_schema, channel=channel, approvers=approvers,
                                   idempotency_key=idempotency_key, context=context, requested_by=requested_by,
                                   timing=timing, suggestions=suggestions, session=session, state=state)
        return raise_unless_approved(await self._wait_or_cancel(handle.id, timeout))

    async def submit(self, action: str, params: Mapping[str, Any], *, summary: str,
                     preview: Mapping[str, Any] | None = None, risk: str | None = None,
                     params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
                     approvers: Sequence[str] | None = None, idempotency_key: str | None = None,
                     context: str | None = None, requested_by: str | None = None,
                     timing: Mapping[str, Any] | None = None,
                     allowed_decisions: Sequence[str] | None = None,
                     suggestions: Sequence[Mapping[str, Any]] | None = None,
                     session: str | None = None, callback_url: str | None = None,
                     state: str | None = None) -> AsyncSubmission:
        body = p.approval_body(action, params, summary=summary, preview=preview, risk=risk,
                               params_schema=params_schema, channel=channel, approvers=approvers,
                               context=context, requested_by=requested_by, timing=timing,
                               allowed_decisions=allowed_decisions, suggestions=suggestions, session=session,
                               callback_url=callback_url, state=state)
        key = idempotency_key or p.new_key()
        answer, status = await self._send("POST", "/api/v1/approvals", json=body, key=key)
        return AsyncSubmission(str(answer["id"]), answer, status == 201, self,
                               self._keys.note(str(answer["id"]), key))

    async def submit_batch(self, items: Sequence[Mapping[str, Any]], *, summary: str, risk: str | None = None,
                           channel: str | None = None, approvers: Sequence[str] | None = None,
                           idempotency_key: str | None = None, context: str | None = None,
                           requested_by: str | None = None,
                           timing: Mapping[str, Any] | None = None,
                           callback_url: str | None = None, session: str | None = None) -> AsyncSubmission:
        body = p.batch_body(items, summary=summary, risk=risk, channel=channel, approvers=approvers,
                            context=context, requested_by=requested_by, timing=timing, callback_url=callback_url,
                            session=session)
        key = idempotency_key or p.new_key()
        answer, status = await self._send("POST", "/api/v1/approvals", json=body, key=key)
        return AsyncSubmission(str(answer["id"]), answer, status == 201, self,
                               self._keys.note(str(answer["id"]), key))

    async def ask(self, questions: Sequence[Mapping[str, Any]], *, summary: str | None = None,
                  context: str | None = None, channel: str | None = None, approvers: Sequence[str] | None = None,
                  timeout: float | None = None, idempotency_key: str | None = None,
                  requested_by: str | None = None) -> Answers:
        body = p.question_body(questions, summary=summary, context=context, channel=channel,
                               approvers=approvers, requested_by=requested_by)
        key = idempotency_key or p.new_key()
        answer, _ = await self._send("POST", "/api/v1/questions", json=body, key=key)
        self._keys.note(str(answer["id"]), key)
        decision = raise_unless_approved(await self._wait_or_cancel(str(answer["id"]), timeout))
        return Answers.from_question(await self.get(decision.request_id))

    async def submit_questions(self, questions: Sequence[Mapping[str, Any]], *, summary: str | None = None,
                               context: str | None = None, channel: str | None = None,
                               approvers: Sequence[str] | None = None, idempotency_key: str | None = None,
                               requested_by: str | None = None,
                               callback_url: str | None = None) -> AsyncSubmission:
        body = p.question_body(questions, summary=summary, context=context, channel=channel,
                               approvers=approvers, requested_by=requested_by, callback_url=callback_url)
        key = idempotency_key or p.new_key()
        answer, status = await self._send("POST", "/api/v1/questions", json=body, key=key)
        return AsyncSubmission(str(answer["id"]), answer, status == 201, self,
                               self._keys.note(str(answer["id"]), key))

    async def get(self, request_id: str, *, wait: float = 0.0) -> Json:
        wait = max(0.0, min(wait, p.MAX_LONG_POLL))
        path = p.item_path(request_id) + (f"?wait={wait:g}" if wait else "")
        return (await self._send("GET", path, timeout=p.wait_timeout(wait)))[0]

    async def find(self, idempotency_key: str) -> Json | None:
        items = (await self._send("GET", "/api/v1/approvals?" + urlencode({"idempotency_key": idempotency_key})))[0]
        return items["items"][0] if items.get("items") else None

    async def decision(self, request_id: str, timeout: float | None = None) -> Decision | None:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        pace = PollPace()
        while True:
            left = p.MAX_LONG_POLL if deadline is None else deadline - loop.time()
            asked, sent = max(0.0, min(left, p.MAX_LONG_POLL)), loop.time()
            found = ended(await self.get(request_id, wait=asked), request_id, self._keys.of(request_id))
            now = loop.time()
            if found is not None or (deadline is not None and now >= deadline):
                return found
            pause = pace.pause(asked, now - sent)
            await asyncio.sleep(pause if deadline is None else min(pause, deadline - now))

    async def wait(self, request_id: str, timeout: float | None = None) -> Decision:
        found = await self.decision(request_id, timeout)
        if found is None:
            raise StillPending(f"{request_id} is still pending after {timeout:g}s", request_id=request_id)
        return raise_unless_approved(found)

    async def cancel(self, request_id: str, reason: str | None = None) -> Decision:
        body, _ = await self._send("POST", p.item_path(request_id).replace("/questions/", "/approvals/") + "/cancel",
                                   json={"reason": reason} if reason else {}, allow_conflict=True)
        found = final_decision(body.get("request", body))
        assert found is not None, body
        return found

    async def _wait_or_cancel(self, request_id: str, timeout: float | None) -> Decision:
        try:
            found = await self.decision(request_id, timeout)
        except UndeliverableError as exc:
            found = await self.cancel(request_id, exc.cancel_reason)
            if found.outcome == "cancelled":
                raise exc.cancelled() from None
            return found
        if found is not None:
            return found
        found = await self.cancel(request_id, _timed_out_message(timeout))
        if found.outcome == "cancelled":
            raise Expired(_timed_out_message(timeout), decision=found)
        return found

    async def _send(self, method: str, path: str, *, json: Any = None, key: str | None = None,
                    timeout: httpx2.Timeout | None = None, allow_conflict: bool = False) -> tuple[Json, int]:
        if path != sig.KEYS_PATH and sig.keyring().wants_fetch(self.config.url):  # first (and stale): the server's keys
            sig.keyring().pin(self.config.url, (await self._send("GET", sig.KEYS_PATH))[0])
        headers = {"Idempotency-Key": key} if key else None
        started, backoff = time.monotonic(), FIRST_BACKOFF
        while True:
            response = None
            try:
                response = await self._http.request(method, self.config.url + path, json=json, headers=headers,
                                                    timeout=timeout or p.wait_timeout(0))
                if not p.retryable(response):
                    _answered(self.config.url)
                    body = p.read_json(response, allow_conflict=allow_conflict)
                    if path != sig.KEYS_PATH and sig.keyring().wants_refresh(self.config.url, body):
                        # A key this process does not know yet (a rotation): read the keys again (bounded).
                        sig.keyring().pin(self.config.url, (await self._send("GET", sig.KEYS_PATH))[0])
                    return body, response.status_code
                problem = f"HTTP {response.status_code}"
            except httpx2.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            pause = retry_pause(response, backoff)
            if _give_up(started, pause, self.config.retry_for):
                raise SignoffUnavailable(_unavailable(self.config.url, method, path, problem, response))
            _retrying(self.config.url, method, path, problem, self.config.retry_for, response)
            await asyncio.sleep(pause)  # backoff between retries of a failed call; waiting is the long-poll
            backoff = next_backoff(backoff)


@contextmanager
def given_or_default(client: SignoffClient | None) -> Iterator[SignoffClient]:
    """The caller's client, or one from SIGNOFF_URL / SIGNOFF_TOKEN closed on the way out (even by an
    interrupt): for helpers that take an optional `client=`."""
    if client is not None:
        yield client
        return
    with SignoffClient() as made:
        yield made
