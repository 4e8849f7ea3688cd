"""What can go wrong when an agent asks Signoff, drawn in one place.

    SignoffError                 the one base: catch it to fail closed on anything
    ├── Rejected                 a person said no (carries the reason and who)
    ├── Expired                  nobody decided in time (server timeout, or the caller's own `timeout`)
    ├── Cancelled                the request was withdrawn before anyone decided
    ├── StillPending             `wait(..., timeout=)` ran out while the request is still open
    ├── UndeliverableError       Slack refused the request's card for good: nobody can see it (not approved)
    ├── SignoffUnavailable       the server could not be reached or kept failing (network, 5xx, 429)
    ├── StateChanged             what the approval was computed from kept changing after each approval (nothing ran)
    ├── SignatureInvalid         a decision not signed by the server's key: forged, altered or replayed (nothing runs)
    ├── SignoffRequestError      the server refused the request itself (4xx: bad input, bad token, unknown id)
    │   └── ResumeTaken          another resumer holds the resume claim, or it was finished (signoff.resumes)
    └── WebhookRefused           a POST to an agent's webhook receiver that Signoff did not sign (or not just now)

`Rejected`, `Expired` and `Cancelled` carry the final `Decision` when the server gave one, so a caller
can still read who decided and why. None of these means "approved": only a returned `Decision` does.
"""

from __future__ import annotations

from typing import Any

# `decision` below is a signoff.models.Decision. Not imported, not even for type checking: models
# raises ParamsChanged from here, and the agent side keeps no import cycles (tests/project/test_imports.py).


class SignoffError(Exception):
    """Base of every error the agent side raises; `code` is a short machine-readable name."""

    code = "signoff_error"

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class _Ended(SignoffError):
    """A request that ended without an approval; `decision` is the server's record of how."""

    def __init__(self, message: str, *, decision: Any = None, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id or (decision.request_id if decision else None))
        self.decision = decision


class Rejected(_Ended):
    """A person rejected the request. `reason` is what they wrote (may be None), `by` who they are."""

    code = "rejected"

    @property
    def reason(self) -> str | None:
        return self.decision.comment if self.decision else None

    @property
    def by(self) -> str | None:
        return self.decision.decider if self.decision else None


class Expired(_Ended):
    """Nobody decided in time."""

    code = "expired"


class Cancelled(_Ended):
    """The request was cancelled before anyone decided."""

    code = "cancelled"


class ParamsChanged(SignoffError):
    """An approval whose parameters do not hash to its `params_sha256`: they are not what a person
    approved (changed after the decision, or in transit). The action must not run."""

    code = "params_changed"


class StateChanged(SignoffError):
    """What the approved preview was computed from (its `state`) kept changing after each approval:
    asked again up to the limit, then nothing ran."""

    code = "state_changed"


class SignatureInvalid(SignoffError):
    """A decision without a valid signature by a key this agent trusts (signoff.signatures): forged,
    altered or replayed on the way from the server. The action must not run."""

    code = "decision_signature_invalid"


class StillPending(SignoffError):
    """The caller's own wait ran out; the request is still open on the server (wait again later)."""

    code = "pending"


class UndeliverableError(SignoffError):
    """Slack refused the request's card for good (the server's `delivery.status` is `failed`): nobody
    can see the request, so nobody will decide it. Treat it as not approved.

    `reason` is Slack's error (`channel_not_found`, `not_in_channel`, `is_archived`, `missing_scope`,
    `invalid_auth`, ...), `channel` the channel it was for, `delivery` the server's whole `delivery`
    object, and `message` says what failed and how to fix it."""

    code = "undeliverable"

    def __init__(self, message: str, *, request_id: str | None, reason: str | None,
                 channel: str | None = None, delivery: Any = None) -> None:
        super().__init__(message, request_id=request_id)
        self.reason = reason
        self.channel = channel
        self.delivery = delivery

    @property
    def cancel_reason(self) -> str:
        """What a client that gives up on the request records as the reason it cancels it."""
        return f"its card could not be posted in Slack ({self.reason}); cancelled by the agent's client"

    def cancelled(self) -> UndeliverableError:
        """The same error, saying the request was cancelled (by the client that made it)."""
        return UndeliverableError(f"{self.message} The request was cancelled.", request_id=self.request_id,
                                  reason=self.reason, channel=self.channel, delivery=self.delivery)


class SignoffUnavailable(SignoffError):
    """The server did not answer usefully (network errors, 5xx, 429) for as long as the client kept trying."""

    code = "unavailable"


class SignoffRequestError(SignoffError):
    """The server refused the call (4xx). `status`, `error_code` and `details` are the server's answer."""

    code = "request_error"

    def __init__(self, message: str, *, status: int, error_code: str | None = None,
                 details: Any = None, request_id: str | None = None) -> None:
        super().__init__(message, request_id=request_id)
        self.status = status
        self.error_code = error_code
        self.details = details


class WebhookRefused(SignoffError):
    """A delivery to a webhook receiver that is not Signoff's: unsigned, wrongly signed, stale, or not a
    webhook's shape. `status` is what the receiver answers (401 or 400); nothing in the body was used."""

    code = "webhook_refused"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status
