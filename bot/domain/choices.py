"""Which decisions a request offers: the optional `allowed_decisions` an agent sends.

Frameworks such as LangChain's HumanInTheLoopMiddleware say per action what a reviewer may do
(`approve`, `edit`, `reject`, `respond`). A request that names none offers the usual three
(approve, edit, reject). The list lives in the request's `extra` (no column of its own): it is
fixed at submit and read by the card (which buttons appear) and by every click handler (which
refuses a decision the request does not offer, so a forged or stale button cannot get around it).

`respond` means "answer in place of running the action": it is recorded as a rejection (the
action must not run) with `via` = `reply` and the person's answer as the comment.

A person can always say no: `reject` is offered whatever the list says (an agent may take
Approve, Edit or Reply away, never Reject), on requests stored before this rule too.
"""

from __future__ import annotations

from typing import Any

from bot.domain.values import Kind

DECISIONS = ("approve", "edit", "reject", "respond")
DEFAULT = ("approve", "edit", "reject")
ALWAYS = "reject"
EXTRA_KEY = "allowed_decisions"

LABELS = {"approve": "Approve", "edit": "Edit", "reject": "Reject", "respond": "Reply instead"}


def allowed_decisions(kind: Kind, extra: dict[str, Any]) -> tuple[str, ...]:
    """The decisions a request offers, in DECISIONS order (questions: none of these)."""
    if kind is not Kind.APPROVAL:
        return ()
    return offered_of(extra.get(EXTRA_KEY))


def offered_of(given: Any) -> tuple[str, ...]:
    """The decisions a list an agent gave offers (None or not a list: DEFAULT), Reject always among them."""
    if not isinstance(given, list | tuple):
        return DEFAULT
    return tuple(d for d in DECISIONS if d in given or d == ALWAYS)


def refusal(decision: str, offered: tuple[str, ...]) -> str:
    """Why a click for `decision` was not recorded, naming what the request does offer."""
    names = ", ".join(LABELS[d] for d in offered) or "nothing"
    return f"{LABELS.get(decision, decision)} is not offered for this request (it offers: {names}). Nothing was changed."
