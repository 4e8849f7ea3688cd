"""DBOS workflows ask a person in Slack, wait durably, and continue exactly once with what was approved.

    from signoff.dbos import approval, serve_webhooks

    @DBOS.workflow()
    def refund(order: str, amount: int) -> str:
        decision = approval("refund", {"order": order, "amount": amount}, summary=f"Refund {order}",
                            callback_url="http://worker.internal:8090/signoff/webhook")
        return pay(**decision.params)   # a DBOS step: the parameters as approved, maybe edited

    DBOS.launch()                        # recovers the workflows a killed worker left waiting
    serve_webhooks(8090)                 # Signoff's signed webhooks become DBOS messages

Invariants:
- One call, one card: the request is submitted in a DBOS step (`signoff.submit`) under an
  Idempotency-Key made of the workflow id and that step's id, both the same when DBOS replays the
  workflow, so a worker killed after the POST and before DBOS recorded the step finds the same request.
- The wait is DBOS's own: `DBOS.recv` on a topic of this request alone, with a durable timeout. A
  worker killed while waiting is recovered by the next `DBOS.launch()` and waits on from where it was.
  `handle_webhook` turns the decided webhook into that message once Signoff's signature checks out; the
  workflow it goes to is read from the signed body (the request's `callback_url`), never from anything
  unsigned, and one request sends at most one message (its id is the idempotency key).
- A lost webhook does not strand the workflow: after each wait that brought nothing, one recorded step
  (`signoff.poll`) asks Signoff. Waits start at `poll_every` seconds (at least 1) and double up to
  `poll_max`, so the loop never runs faster than one round a second and a day-long wait costs a few
  hundred rows, not thousands.
- Deterministic on replay: everything the workflow branches on (the request, each poll's answer and
  its time) comes from a recorded step or message, never from a clock read or a call outside a step.
- Signed: the server's signing key is pinned before any decision is read (SIGNOFF_PUBLIC_KEY, or fetched
  once per process), so a decision it did not sign (forged, altered, another request's) raises
  `SignatureInvalid` in the workflow, and nothing runs.
- Receipts: `run_approved(decision, step)` runs the step with the approved parameters and reports
  what it did in a recorded step (`signoff.report`): once, however often the workflow is recovered.
- Fail closed: only an approved decision returns; every other ending raises (`Rejected`, `Expired`,
  `Cancelled`; a request whose card Slack refused is cancelled, so `Cancelled` with the reason); the
  caller's own `timeout` cancels the request first and raises `Expired`.

DBOS is imported when a function here is called: importing this module needs only `signoff`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

from signoff._protocol import undeliverable
from signoff.client import _timed_out_message, given_or_default, raise_unless_approved
from signoff.webhook_server import WebhookServer, serve
from signoff.errors import Expired, SignoffError, SignoffUnavailable, WebhookRefused
from signoff.models import Decision, final_decision
from signoff.webhooks import DECIDED, read

if TYPE_CHECKING:
    from dbos import DBOS

    from signoff.client import SignoffClient

__all__ = ["WebhookServer", "approval", "handle_webhook", "request_key", "run_approved", "serve_webhooks", "topic"]

log = logging.getLogger("signoff.dbos")

WORKFLOW_PARAM = "dbos_workflow"  # the query parameter of a callback_url that names the waiting workflow
KEY_MAX = 255  # the server's Idempotency-Key limit
MIN_POLL = 1.0  # seconds: the fastest the wait loop may go round
T = TypeVar("T")


def topic(request_id: str) -> str:
    """The DBOS message topic a request's decision arrives on (one topic per request)."""
    return f"signoff:{request_id}"


def request_key(workflow_id: str, step_id: int) -> str:
    """The Idempotency-Key of the request submitted at step `step_id` of workflow `workflow_id`."""
    key = f"dbos:{workflow_id}:{step_id}"
    if len(key) <= KEY_MAX:
        return key
    return f"dbos:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def with_workflow(callback_url: str, workflow_id: str) -> str:
    """`callback_url` naming the workflow that waits (`?dbos_workflow=...`), other parameters kept."""
    parts = urlsplit(callback_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SignoffError(f"callback_url must be an http:// or https:// URL, not {callback_url[:80]!r}")
    query = [(k, v) for k, values in parse_qs(parts.query, keep_blank_values=True).items() for v in values
             if k != WORKFLOW_PARAM]
    return urlunsplit(parts._replace(query=urlencode([*query, (WORKFLOW_PARAM, workflow_id)])))


def workflow_of(callback_url: object) -> str | None:
    """The workflow a request's `callback_url` names, or None."""
    if not isinstance(callback_url, str):
        return None
    found = parse_qs(urlsplit(callback_url).query).get(WORKFLOW_PARAM)
    return found[-1] if found else None


def _dbos() -> type[DBOS]:
    try:
        from dbos import DBOS
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SignoffError("signoff.dbos needs DBOS: pip install 'signoff[dbos]'") from exc
    return DBOS


# -- in a workflow ------------------------------------------------------------------------------


def approval(action: str, params: Mapping[str, Any], *, summary: str | None = None,
             callback_url: str | None = None, poll_every: float = 60.0, poll_max: float = 900.0,
             timeout: float | None = None, client: SignoffClient | None = None,
             preview: Mapping[str, Any] | None = None, risk: str | None = None,
             params_schema: Mapping[str, Any] | None = None, channel: str | None = None,
             approvers: Sequence[str] | None = None, context: str | None = None,
             requested_by: str | None = None, timing: Mapping[str, Any] | None = None,
             allowed_decisions: Sequence[str] | None = None) -> Decision:
    """Ask for approval of `action(params)` from a DBOS workflow; wait, durably, until a person decides.

    Call it in the workflow itself (not in a step). `callback_url`: where `serve_webhooks` (or your own
    route calling `handle_webhook`) listens, as Signoff can reach it; the decision then arrives at once.
    Without it, or when a webhook is lost, the decision is found by asking Signoff after `poll_every`
    seconds of waiting, then after twice that, up to every `poll_max` seconds. `timeout`: seconds after
    which the request is cancelled and `Expired` raised (unset: wait as long as the request is open).

    Returns the approved `Decision` (run the action with `decision.params`: a person may have edited
    them); raises `Rejected` (`.reason`), `Expired` or `Cancelled` otherwise.
    """
    dbos = _dbos()
    if poll_every < MIN_POLL or poll_max < poll_every:
        raise SignoffError(f"poll_every must be at least {MIN_POLL:g} s and poll_max at least poll_every "
                           f"(got {poll_every:g} and {poll_max:g})")
    if timeout is not None and timeout <= 0:
        raise SignoffError(f"timeout must be more than 0 seconds (got {timeout:g})")
    workflow_id = dbos.workflow_id
    if workflow_id is None or dbos.step_id is not None:
        raise SignoffError("approval() must be called in a DBOS workflow (a function decorated with "
                           "@DBOS.workflow()), not in a step or outside one")
    card: dict[str, Any] = {
        "summary": summary or f"Run {action}", "preview": preview, "risk": risk, "params_schema": params_schema,
        "channel": channel, "approvers": approvers, "context": context, "requested_by": requested_by,
        "timing": timing, "allowed_decisions": allowed_decisions,
        "callback_url": with_workflow(callback_url, workflow_id) if callback_url else None,
    }
    _trust_key(client)  # before any decision is read: a recorded message or a webhook is checked like a reply
    submitted = dbos.run_step({"name": "signoff.submit"}, _submit, client, action, dict(params), card, timeout)
    request_id, deadline, at = str(submitted["request"]["id"]), submitted["deadline"], submitted["at"]
    found, timed_out, gap = final_decision(submitted["request"]), False, poll_every
    while found is None:
        wait = gap if deadline is None else max(0.0, min(gap, deadline - at))
        found = _decision_in(dbos.recv(topic(request_id), timeout_seconds=wait), request_id)
        if found is None:
            polled = dbos.run_step({"name": "signoff.poll"}, _poll, client, request_id, deadline, timeout)
            at, timed_out = polled["at"], polled["timed_out"]
            found = final_decision(polled["request"]) if polled["request"] is not None else None
        gap = min(gap * 2, poll_max)
    if timed_out and found.outcome == "cancelled":
        raise Expired(_timed_out_message(timeout), decision=found)
    return raise_unless_approved(found)


def run_approved(decision: Decision, step: Callable[..., T], *, client: SignoffClient | None = None) -> T:
    """Run `step` (a `@DBOS.step()`) with the approved parameters, then report what it did to Signoff (an
    execution receipt: `ran` with a short result, or `failed` with the error, which is raised on), in a
    recorded step of its own: a recovered workflow replays both and reports once. Call it in the workflow."""
    dbos = _dbos()
    try:
        result = step(**decision.params)
    except Exception as exc:
        dbos.run_step({"name": "signoff.report"}, _report, client, decision.request_id, "failed", decision.params,
                      None, f"{type(exc).__name__}: {exc}")
        raise
    dbos.run_step({"name": "signoff.report"}, _report, client, decision.request_id, "ran", decision.params,
                  result, None)
    return result


def _report(client: SignoffClient | None, request_id: str, status: str, params: dict[str, Any], result: Any,
            error: str | None) -> bool:
    """The step that reports: True when Signoff recorded it (a lost report is logged, never raised)."""
    with given_or_default(client) as signoff:
        return signoff.report_quietly(request_id, status, params=params, result=result, error=error) is not None


def _trust_key(client: SignoffClient | None) -> None:
    """Pin the server's signing key in this process (a recovered worker may read a decision before its
    first call to Signoff). Not a step: it decides nothing, it only lets a forged decision be refused."""
    with given_or_default(client) as signoff:
        signoff.trust_server_key()  # unreachable past the client's retries: raises (fail closed)


def _decision_in(message: Any, request_id: str) -> Decision | None:
    """The decision a message brought, if it is this request's and final (anything else: wait on)."""
    if isinstance(message, Mapping) and message.get("id") == request_id:
        return final_decision(message)
    return None


def _submit(client: SignoffClient | None, action: str, params: dict[str, Any], card: dict[str, Any],
            timeout: float | None) -> dict[str, Any]:
    """The step that submits: the request's JSON, and when the caller's own timeout runs out."""
    dbos = _dbos()
    workflow_id, step_id = dbos.workflow_id, dbos.step_id
    assert workflow_id is not None and step_id is not None, "run as a DBOS step"
    key = request_key(workflow_id, step_id)
    with given_or_default(client) as signoff:
        submitted = signoff.submit(action, params, idempotency_key=key, **card)
    now = time.time()
    return {"request": submitted.body, "at": now, "deadline": None if timeout is None else now + timeout}


def _poll(client: SignoffClient | None, request_id: str, deadline: float | None,
          timeout: float | None) -> dict[str, Any]:
    """The step that asks Signoff once. Cancels the request when its card could not be posted or the
    caller's timeout has run out; `request` None when Signoff could not be reached (ask again later)."""
    timed_out = False
    with given_or_default(client) as signoff:
        try:
            body = signoff.get(request_id)
            if final_decision(body) is None:
                refused = undeliverable(body)
                if refused is not None:  # nobody can see it: not approved (a decision that came first stands)
                    log.warning("%s The request is cancelled.", refused.message)
                    signoff.cancel(request_id, refused.cancel_reason)
                    body = signoff.get(request_id)
                elif deadline is not None and time.time() >= deadline:
                    timed_out = True
                    signoff.cancel(request_id, _timed_out_message(timeout))
                    body = signoff.get(request_id)
        except SignoffUnavailable as exc:
            if deadline is not None and time.time() >= deadline:
                raise  # past the caller's timeout and nobody to cancel with: not approved
            log.warning("could not ask Signoff about %s (asking again later): %s", request_id, exc)
            return {"request": None, "at": time.time(), "timed_out": False}
    return {"request": body, "at": time.time(), "timed_out": timed_out}


# -- the webhook receiver -----------------------------------------------------------------------


def _secret(secret: str | None) -> str:
    chosen = secret or os.environ.get("SIGNOFF_WEBHOOK_SECRET")
    if not chosen:
        raise SignoffError("no webhook secret: pass secret= or set SIGNOFF_WEBHOOK_SECRET to the Signoff "
                           "server's SIGNOFF_WEBHOOK_SECRET")
    return chosen


def handle_webhook(body: bytes, headers: Mapping[str, str], *, secret: str | None = None) -> tuple[int, dict[str, Any]]:
    """Turn one POST from Signoff into the DBOS message its workflow waits for: (HTTP status, JSON answer).

    For a route of your own web framework: pass the raw body and the headers, answer what it returns.
    401 when the signature does not check out (nothing is sent); 400 when the signed request names no
    DBOS workflow (it was not made by `approval()`); 404 when this DBOS database has no such workflow;
    200 otherwise (a repeat of a delivery is harmless: one request sends one message).
    """
    try:
        hook = read(body, headers, _secret(secret))
    except WebhookRefused as no:
        log.warning("webhook refused (%s): %s", no.status, no.message)
        return no.status, {"error": no.message}
    if hook.type != DECIDED:
        return 200, {"ignored": f"{hook.type} events are not waited for"}
    try:
        decision = hook.decision
    except SignoffError as exc:  # ParamsChanged: signed, yet not what was approved
        return 400, {"error": exc.message}
    if decision is None:
        return 200, {"ignored": f"{hook.request_id} is still pending"}
    workflow_id = workflow_of(hook.request.get("callback_url"))
    if workflow_id is None:
        return 400, {"error": f"{hook.request_id}'s callback_url names no DBOS workflow "
                              f"(?{WORKFLOW_PARAM}=...): it was not submitted by signoff.dbos.approval()"}
    dbos = _dbos()
    from dbos import error

    try:
        dbos.send(workflow_id, hook.request, topic(hook.request_id), idempotency_key=topic(hook.request_id))
    except error.DBOSNonExistentWorkflowError:
        return 404, {"error": f"no DBOS workflow {workflow_id} in this worker's system database"}
    log.info("%s (%s) delivered to workflow %s", hook.request_id, decision.outcome, workflow_id)
    return 200, {"delivered": hook.request_id, "workflow": workflow_id}


def serve_webhooks(port: int, *, host: str = "127.0.0.1", path: str = "/signoff/webhook",
                   secret: str | None = None) -> WebhookServer:
    """Listen for Signoff's webhooks on `host`:`port` (`path`) in a background thread; `.close()` stops it.

    Call it after `DBOS.launch()`. `secret` defaults to SIGNOFF_WEBHOOK_SECRET (the server's own value);
    without one this raises at once rather than refusing every delivery later."""
    chosen = _secret(secret)
    return serve(lambda body, headers: handle_webhook(body, headers, secret=chosen), host=host, port=port,
                 path=path)
