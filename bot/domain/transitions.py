"""The request state machine as a pure table. An illegal move raises; it never passes silently."""

from __future__ import annotations

from bot.domain.model import Kind, Outcome, Status

_OUTCOME_STATUS = {
    Outcome.APPROVED: Status.APPROVED,
    Outcome.REJECTED: Status.REJECTED,
    Outcome.EXPIRED: Status.EXPIRED,
    Outcome.CANCELLED: Status.CANCELLED,
    Outcome.ANSWERED: Status.ANSWERED,
}

# Which outcomes each kind of request may end with, from `pending`.
_ALLOWED: dict[Kind, frozenset[Outcome]] = {
    Kind.APPROVAL: frozenset({Outcome.APPROVED, Outcome.REJECTED, Outcome.EXPIRED, Outcome.CANCELLED}),
    # rejected: a person declined to answer (an MCP elicitation's Decline: bot.domain.elicitation)
    Kind.QUESTION: frozenset({Outcome.ANSWERED, Outcome.REJECTED, Outcome.EXPIRED, Outcome.CANCELLED}),
}


class IllegalTransition(ValueError):
    def __init__(self, kind: Kind, status: Status, outcome: Outcome) -> None:
        super().__init__(f"a {kind.value} request that is {status.value} cannot become {outcome.value}")
        self.kind, self.status, self.outcome = kind, status, outcome


def next_status(kind: Kind, status: Status, outcome: Outcome) -> Status:
    """The status a request moves to when `outcome` is recorded; raises IllegalTransition."""
    if status is not Status.PENDING or outcome not in _ALLOWED[kind]:
        raise IllegalTransition(kind, status, outcome)
    return _OUTCOME_STATUS[outcome]

