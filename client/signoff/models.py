"""Typed answers the server gives an agent: a `Decision` for an approval, `Answers` for questions.

They are read from the agent API's JSON (`GET /api/v1/approvals/{id}`, `GET /api/v1/questions/{id}`)
and never hold more than it said: a decision is a record (who, how, what changed), never a bool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

FINAL = ("approved", "rejected", "expired", "cancelled", "answered")
from signoff._hash import params_sha256
import signoff.signatures as signatures
from signoff.errors import ParamsChanged


@dataclass(frozen=True)
class Actor:
    """Who decided: a Slack user id and, when known, their name."""

    id: str
    name: str | None = None


@dataclass(frozen=True)
class Change:
    """One parameter a person edited before approving."""

    field: str
    before: Any
    after: Any


@dataclass(frozen=True)
class ItemDecision:
    """How one action of a batch ended. Run it only when `approved`, and with `params`.

    `outcome`: approved | rejected, or None when the batch expired or was cancelled before anyone
    decided this action; `via`: button | modal | reply ("Reply instead": see `reply`) | timeout | api.
    """

    index: int
    name: str
    outcome: str | None
    params: dict[str, Any]
    changes: tuple[Change, ...] = ()
    comment: str | None = None
    via: str | None = None
    key: str | None = None
    decided_by: Actor | None = None
    params_sha256: str | None = None

    @property
    def decider(self) -> str | None:
        """Who decided this action, by name where Slack gave one (None: nobody, e.g. the clock)."""
        return self.decided_by.name or self.decided_by.id if self.decided_by else None

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @property
    def edited(self) -> bool:
        return bool(self.changes)

    @property
    def reply(self) -> str | None:
        """The person's answer when they chose "Reply instead" for this action (it must not run)."""
        return self.comment if self.outcome == "rejected" and self.via == "reply" else None

    @classmethod
    def from_json(cls, index: int, raw: Mapping[str, Any], request_id: object) -> ItemDecision:
        bound = raw.get("params_sha256")
        if raw.get("outcome") == "approved" and bound is not None and bound != params_sha256(raw.get("params") or {}):
            raise ParamsChanged(f"request {request_id}, action {index + 1}: the parameters returned are not the ones "
                                "that were approved (params_sha256 differs); nothing may run with them")
        who = raw.get("decided_by")
        return cls(index=index, name=str(raw.get("name")), outcome=raw.get("outcome"),
                   params=dict(raw.get("params") or {}),
                   changes=tuple(Change(c.get("field"), c.get("from"), c.get("to")) for c in raw.get("changes") or []),
                   comment=raw.get("comment"), via=raw.get("via"), key=raw.get("key"),
                   decided_by=Actor(str(who.get("id")), who.get("name")) if isinstance(who, dict) else None,
                   params_sha256=bound)


@dataclass(frozen=True)
class Decision:
    """How a request ended. Run the action with `params`, never with what was proposed.

    `outcome`: approved | rejected | expired | cancelled (answered for questions);
    `via`: button | modal | policy | grant | timeout | api | thread | reply ("Reply instead": see `reply`).
    A batch (`items`) is approved when any of its actions was: run each by its own `ItemDecision`.
    """

    request_id: str
    outcome: str
    params: dict[str, Any]
    changes: tuple[Change, ...] = ()
    comment: str | None = None
    decided_by: Actor | None = None
    decided_at: datetime | None = None
    via: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    items: tuple[ItemDecision, ...] = ()  # a batch: each action's own decision, in order

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @property
    def edited(self) -> bool:
        return bool(self.changes)

    @property
    def decider(self) -> str | None:
        """Who decided, by name where Slack gave one (None: nobody, e.g. policy or the clock)."""
        return self.decided_by.name or self.decided_by.id if self.decided_by else None

    @property
    def edits_words(self) -> str:
        """The fields the person changed, as ' with edits to subject, body' (empty when none)."""
        return f" with edits to {', '.join(c.field for c in self.changes)}" if self.changes else ""

    @property
    def accepted_suggestion(self) -> tuple[int, dict[str, Any]] | None:
        """The Claude permission suggestion the person accepted ("Approve & always allow ..."): its
        index in the list the agent sent, and the update as sent. None when they just approved."""
        found = self.raw.get("suggestion")
        if self.outcome != "approved" or not isinstance(found, dict) or not isinstance(found.get("update"), dict):
            return None
        index = found.get("index")
        return (index, dict(found["update"])) if isinstance(index, int) else None

    @property
    def state(self) -> str | None:
        """What the preview the person saw was computed from (the `state` given at submit), if given:
        re-check it before the action runs; if the world changed, ask again."""
        found = self.raw.get("state")
        return found if isinstance(found, str) else None

    @property
    def reply(self) -> str | None:
        """The person's answer when they chose "Reply instead" (a rejection: the action must not run)."""
        return self.comment if self.outcome == "rejected" and self.via == "reply" else None

    @classmethod
    def from_request(cls, body: Mapping[str, Any]) -> Decision | None:
        """The decision in a request's JSON, or None while it is pending."""
        signatures.keyring().check(body)  # before anything of it is read: a decision the server did not sign
        raw = body.get("decision")
        if not isinstance(raw, dict):
            return None
        bound = raw.get("params_sha256")
        if raw.get("outcome") == "approved" and bound is not None and bound != params_sha256(raw.get("params") or {}):
            # Every way the agent side learns of an approval passes here: nothing runs with parameters
            # that are not the ones a person approved.
            raise ParamsChanged(f"request {body.get('id')}: the parameters returned are not the ones that were "
                                "approved (params_sha256 differs); nothing may run with them")
        who = raw.get("decided_by")
        at = raw.get("decided_at")
        return cls(
            request_id=str(body.get("id")),
            outcome=str(raw.get("outcome")),
            params=dict(raw.get("params") or {}),
            changes=tuple(Change(c.get("field"), c.get("from"), c.get("to")) for c in raw.get("changes") or []),
            comment=raw.get("comment"),
            decided_by=Actor(str(who.get("id")), who.get("name")) if isinstance(who, dict) else None,
            decided_at=datetime.fromisoformat(at.replace("Z", "+00:00")) if isinstance(at, str) else None,
            via=raw.get("via"),
            raw=dict(raw),
            items=tuple(ItemDecision.from_json(n, i, body.get("id")) for n, i in enumerate(raw.get("items") or [])
                        if isinstance(i, Mapping)),
        )

    def to_json(self) -> dict[str, Any]:
        return {"id": self.request_id, **self.raw}


@dataclass(frozen=True)
class Answer:
    """One question's answer: the chosen option labels and/or free text (a thread reply)."""

    question: str
    selected: tuple[str, ...] = ()
    text: str | None = None

    @property
    def value(self) -> str:
        """One string: the labels joined with ", ", then the free text (as Claude's AskUserQuestion wants)."""
        parts = [", ".join(self.selected)] if self.selected else []
        if self.text:
            parts.append(self.text)
        return "; ".join(parts)


@dataclass(frozen=True)
class Answers(Mapping[str, Answer]):
    """The answers to a set of questions, by question text, in the order asked."""

    request_id: str
    answers: tuple[Answer, ...]
    decided_by: Actor | None = None
    via: str | None = None

    def __getitem__(self, question: str) -> Answer:
        for answer in self.answers:
            if answer.question == question:
                return answer
        raise KeyError(question)

    def __iter__(self) -> Iterator[str]:
        return iter(a.question for a in self.answers)

    def __len__(self) -> int:
        return len(self.answers)

    @classmethod
    def from_question(cls, body: Mapping[str, Any]) -> Answers:
        decision = Decision.from_request(body)
        items = tuple(
            Answer(str(a.get("question")), tuple(str(s) for s in a.get("selected") or []), a.get("text"))
            for a in body.get("answers") or []
        )
        return cls(str(body.get("id")), items, decision.decided_by if decision else None,
                   decision.via if decision else None)


def final_decision(body: Mapping[str, Any]) -> Decision | None:
    """The decision of a request that has ended, or None while it is pending."""
    if body.get("status") not in FINAL:
        return None
    return Decision.from_request(body) or Decision(str(body.get("id")), str(body.get("status")), {})
