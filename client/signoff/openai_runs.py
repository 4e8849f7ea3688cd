"""Paused OpenAI Agents SDK runs, kept durably, and a person's decisions applied to their `RunState`.

A paused run is one record (JSON) per `run_id`: the SDK's own `RunState.to_json()`, the turn it is
at, and each call as proposed (`call_id`, `name`, `params`; `verdict` "deny" when policy refused it
before any card) with the Signoff request that asks about it (`request_id`; `item`, its index when
that request is a batch). A turn's calls share one request, a batch card, unless policy puts one of
them where a batch cannot go (`not_batchable`): then each has its own. `FileStore` keeps them as files in one folder (written whole, then renamed: a
reader never sees half a record); any object with the same `load` / `save` is a store.

Invariants:
- Only what a person decided reaches the state: an approved call is `approve`d, and when the person
  edited it its approved parameters go into the run's context under `EDITS_KEY` (keyed by call id),
  where a gated tool reads them (signoff.openai); every other ending is a `reject` whose message is
  the person's reason (or says how it ended), which is what the model reads as the call's output.
- A call policy denied never runs: it is rejected with the policy's reason, with no card.
- Resumed after a resumer died mid-way (its claim taken over): a call approved for that turn may
  have run already, so it is not run again; the model is told its outcome is unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from signoff.errors import SignoffError
from signoff.models import Decision, ItemDecision

EDITS_KEY = "signoff_approved_args"  # in a mapping run context: {call_id: the parameters a person approved}
RUN_KEY = "signoff_run_id"  # in a mapping run context: the run's id, sent as the policy check's `session`
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
KEY_MAX = 200
DENIED = "Signoff's policy denies this call"
UNKNOWN = ("Not run again: this call was approved, but the process resuming it stopped before it could say "
           "whether the call ran. Its outcome is unknown; check before trying again.")


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise SignoffError(f"run_id must be 1-100 letters, digits, '.', '_' or '-' (starting with a letter or digit), "
                           f"not {run_id!r}")
    return run_id


@dataclass(frozen=True)
class PausedCall:
    """One call of a paused turn, as the model proposed it."""

    call_id: str
    name: str
    params: dict[str, Any]
    verdict: str = "ask"  # "deny": policy refused it before any card
    reason: str | None = None
    editable: bool = True  # a tool gated by signoff.openai (its edits reach it)
    request_id: str | None = None  # the request that decides it (None: policy denied it)
    item: int | None = None  # its index in that request when it is a batch

    def to_json(self) -> dict[str, Any]:
        return {"call_id": self.call_id, "name": self.name, "params": self.params, "verdict": self.verdict,
                "reason": self.reason, "editable": self.editable, "request_id": self.request_id, "item": self.item}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PausedCall:
        item = raw.get("item")
        return cls(str(raw["call_id"]), str(raw["name"]), dict(raw.get("params") or {}), str(raw.get("verdict", "ask")),
                   raw.get("reason"), bool(raw.get("editable", True)), raw.get("request_id"),
                   item if isinstance(item, int) else None)


@dataclass(frozen=True)
class PausedRun:
    """A run paused at one turn's interruptions (`status` "paused"), or one that ended ("finished")."""

    run_id: str
    turn: int
    state: dict[str, Any] | None
    calls: tuple[PausedCall, ...]
    status: str = "paused"

    @property
    def request_ids(self) -> tuple[str, ...]:
        """The requests that decide the turn (none when policy denied every call)."""
        return tuple(dict.fromkeys(c.request_id for c in self.calls if c.request_id is not None))

    @property
    def key(self) -> str:
        """The resume claim's key: this run, this turn, its request and calls."""
        digest = hashlib.sha256("|".join([self.run_id, str(self.turn), *self.request_ids, "",
                                          *sorted(c.call_id for c in self.calls)]).encode()).hexdigest()
        key = f"openai:{self.run_id}:{self.turn}:{digest[:24]}"
        return key if len(key) <= KEY_MAX else f"openai:sha256:{digest}"

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "run_id": self.run_id, "turn": self.turn, "status": self.status,
                "calls": [c.to_json() for c in self.calls], "state": self.state}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PausedRun:
        return cls(str(raw["run_id"]), int(raw["turn"]), raw.get("state"),
                   tuple(PausedCall.from_json(c) for c in raw.get("calls") or ()), str(raw.get("status", "paused")))


class RunStore(Protocol):
    def load(self, run_id: str) -> dict[str, Any] | None: ...

    def save(self, run_id: str, record: dict[str, Any]) -> None: ...


class FileStore:
    """Paused runs as `<run_id>.json` files in `folder` (made if missing). Keep it where only the agent's
    own processes write: a state read back here is trusted as the SDK's own (its approvals included)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, run_id: str) -> Path:
        return self.folder / f"{check_run_id(run_id)}.json"

    def load(self, run_id: str) -> dict[str, Any] | None:
        try:
            loaded: dict[str, Any] = json.loads(self.path(run_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return loaded

    def ids(self) -> list[str]:
        """The run ids this folder holds (paused or finished), sorted."""
        return sorted(p.stem for p in self.folder.glob("*.json") if RUN_ID.match(p.stem))

    def save(self, run_id: str, record: dict[str, Any]) -> None:
        target = self.path(run_id)
        handle, temp = tempfile.mkstemp(dir=self.folder, prefix=f".{run_id}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)  # whole or not at all
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise


def store_of(store: RunStore | str | os.PathLike[str]) -> RunStore:
    return FileStore(store) if isinstance(store, str | os.PathLike) else store


# -- the decisions, applied -----------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What happens to one call: run it (with `params` when a person edited them) or tell the model `message`."""

    call: PausedCall
    approved: bool
    params: dict[str, Any] | None = None  # the edited parameters; None: as proposed
    message: str | None = None
    words: str = ""
    item_key: str | None = None  # the batch item that decided it (an execution receipt names it)

    @property
    def ran_with(self) -> dict[str, Any]:
        """The parameters an approved call runs with: the person's edits, else as proposed."""
        return dict(self.params) if self.params is not None else dict(self.call.params)


def _ended_words(decision: Decision) -> str:
    if decision.outcome == "expired":
        return decision.comment or "no decision in time; the request expired"
    if decision.outcome == "cancelled":
        return decision.comment or "the request was cancelled"
    return decision.comment or f"the request ended as {decision.outcome}"


def _one(call: PausedCall, outcome: str | None, params: Mapping[str, Any], comment: str | None,
         who: str | None, ended: str) -> Outcome:
    if outcome == "approved":
        edited = dict(params) if dict(params) != call.params else None
        return Outcome(call, True, edited, words=f"{call.name} approved{f' by {who}' if who else ''}"
                                                   f"{' with edits' if edited else ''}")
    if outcome == "rejected":
        message = comment or f"Rejected by {who or 'a person'} in Slack (no reason given)."
        return Outcome(call, False, message=message, words=f"{call.name} rejected{f' by {who}' if who else ''}")
    message = f"Not approved: {ended}."
    return Outcome(call, False, message=message, words=f"{call.name} not approved ({ended})")


def outcomes(paused: PausedRun, decisions: Mapping[str, Decision]) -> list[Outcome]:
    """Each call's outcome: denied by policy, or as its request's decision says (a batch: per action)."""
    found: list[Outcome] = []
    for call in paused.calls:
        if call.verdict == "deny" or call.request_id is None:
            found.append(Outcome(call, False, message=f"Not run: {call.reason or DENIED}.",
                                 words=f"{call.name} denied by policy"))
            continue
        decision = decisions[call.request_id]
        who = decision.decider
        if call.item is not None:
            if call.item >= len(decision.items):
                raise SignoffError(f"request {call.request_id} has no action {call.item + 1} (for call {call.call_id})")
            item: ItemDecision = decision.items[call.item]
            item_who = item.decider if item.decided_by else who
            found.append(replace(_one(call, item.outcome, item.params, item.comment, item_who, _ended_words(decision)),
                                 item_key=item.key))
        else:
            found.append(_one(call, decision.outcome, decision.params, decision.comment, who, _ended_words(decision)))
    return found


def apply(state: Any, found: Sequence[Outcome], *, taken_over: bool = False) -> None:
    """Approve or reject each interruption of `state` as `found` says (edits travel in the run's context).

    `taken_over`: a resumer before this one stopped mid-way, so approved calls may have run: they are
    rejected with `UNKNOWN` (never run twice)."""
    pending = {item.call_id: item for item in state.get_interruptions()}
    for outcome in found:
        item = pending.get(outcome.call.call_id)
        if item is None:
            raise SignoffError(f"the saved run has no pending call {outcome.call.call_id} ({outcome.call.name}): "
                               "was it resumed elsewhere?")
        if outcome.approved and taken_over:
            state.reject(item, rejection_message=UNKNOWN)
        elif outcome.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=outcome.message)
