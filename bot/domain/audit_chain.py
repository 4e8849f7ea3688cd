"""The audit log's hash chain: pure functions over audit rows (no I/O).

Every audit row gets a chain position `seq` (1, 2, 3, ... with no gap) and
`hash = sha256(prev_hash || canonical(row))`, where `prev_hash` is the hash of the row at `seq - 1`
(`GENESIS` for the first) and `canonical(row)` is the row's id, seq, request id, type, actor, data and
time as compact JSON with sorted keys. Changing any of those fields of a sealed row, deleting one, or
reordering two breaks every later link, and `ChainCheck` names the first row where it breaks.

An anchor (`Anchor`) is the chain's head, position and hash, signed with the decision key at a time and
kept outside the database (published at GET /api/v1/audit/head, in the weekly digest, saved by whoever
audits). Whoever can write to the database can rewrite rows from some position on and hash them all
again into a chain that checks; it then no longer passes through an anchor taken before the rewrite:
`ChainCheck(anchor=...)` requires the row at the anchor's position to have the anchor's hash (a rewrite at
or before it changes that hash) and the chain to reach that position (a truncation does not).

Rows are written without a position (the approval path pays nothing for the chain); a sealer gives
positions in one transaction holding the chain's head row (storage/audit_store.py), so however many
writers and replicas there are, positions stay one line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.domain.values import from_iso, iso

GENESIS = "0" * 64


@dataclass(frozen=True)
class ChainRow:
    """An audit row as the chain sees it; `seq`, `prev_hash` and `hash` are None until sealed."""

    id: int
    request_id: str
    type: str
    actor: str | None
    data: Mapping[str, Any]
    at: datetime
    seq: int | None = None
    prev_hash: str | None = None
    hash: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "seq": self.seq, "request_id": self.request_id, "type": self.type,
                "actor": self.actor, "data": dict(self.data), "at": iso(self.at),
                "prev_hash": self.prev_hash, "hash": self.hash}


def canonical(row: ChainRow, seq: int) -> bytes:
    """The bytes a row's hash covers (its position included: a row cannot move without breaking)."""
    fields = {"id": row.id, "seq": seq, "request_id": row.request_id, "type": row.type, "actor": row.actor,
              "data": row.data, "at": iso(row.at)}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def link(prev_hash: str, row: ChainRow, seq: int) -> str:
    """The hash of `row` at position `seq` after a row whose hash is `prev_hash`."""
    return hashlib.sha256(prev_hash.encode() + b"\n" + canonical(row, seq)).hexdigest()


@dataclass(frozen=True)
class Break:
    """Where the chain first fails: the position, the row's id (None when the row is missing) and why."""

    seq: int
    row_id: int | None
    problem: str

    def words(self) -> str:
        where = f"row {self.row_id} (position {self.seq})" if self.row_id is not None else f"position {self.seq}"
        return f"{where}: {self.problem}"


@dataclass(frozen=True)
class Anchor:
    """The chain's head at `at`: position `seq`, its row's `hash`, signed (`kid`, `sig`: Ed25519, base64url)
    over bot/domain/signatures.py's `anchor_bytes`."""

    seq: int
    hash: str
    at: datetime
    kid: str
    sig: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash, "at": iso(self.at),
                "signature": {"alg": "Ed25519", "kid": self.kid, "sig": self.sig}}

    @classmethod
    def from_json(cls, data: Any) -> Anchor:
        """An anchor as `to_json` wrote it; ValueError naming what is wrong otherwise."""
        if not isinstance(data, dict):
            raise ValueError("an anchor is a JSON object with seq, hash, at and signature")
        sig = data.get("signature")
        seq, head, at = data.get("seq"), data.get("hash"), data.get("at")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise ValueError("the anchor's seq is not a position (a positive integer)")
        if not isinstance(head, str) or len(head) != 64:
            raise ValueError("the anchor's hash is not a SHA-256 in hex")
        if not isinstance(sig, dict) or not isinstance(sig.get("kid"), str) or not isinstance(sig.get("sig"), str):
            raise ValueError("the anchor has no signature (kid, sig)")
        try:
            when = from_iso(str(at))
        except (TypeError, ValueError):
            raise ValueError("the anchor's at is not an ISO time") from None
        return cls(seq, head, when, sig["kid"], sig["sig"])


class ChainCheck:
    """Checks sealed rows fed in position order, one at a time (memory stays flat however long the log).
    With `anchor`, the chain must also pass through it (see the module docstring)."""

    def __init__(self, anchor: Anchor | None = None) -> None:
        self.expected_seq = 1
        self.prev_hash = GENESIS
        self.checked = 0
        self.broken: Break | None = None
        self.anchor = anchor

    def feed(self, row: ChainRow) -> Break | None:
        """The first break (kept once found), or None while the chain holds."""
        if self.broken is not None:
            return self.broken
        assert row.seq is not None
        if row.seq != self.expected_seq:
            self.broken = Break(self.expected_seq, None, f"missing (the next row found is at position {row.seq}, "
                                                        f"row {row.id})")
        elif row.prev_hash != self.prev_hash:
            self.broken = Break(row.seq, row.id, "its link to the previous row does not match: a row before it "
                                                 "was removed, or this one was moved")
        elif row.hash != link(self.prev_hash, row, row.seq):
            self.broken = Break(row.seq, row.id, "altered: its content no longer matches its hash")
        elif self.anchor is not None and row.seq == self.anchor.seq and row.hash != self.anchor.hash:
            self.broken = Break(row.seq, row.id, f"rewritten: the chain checks, but its hash here is not the one "
                                                 f"anchored at {iso(self.anchor.at)} ({self.anchor.hash[:16]}...): "
                                                 "rows up to this position were changed and hashed again")
        else:
            self.expected_seq, self.prev_hash = row.seq + 1, row.hash
            self.checked += 1
        return self.broken

    def finish(self, head_seq: int, head_hash: str) -> Break | None:
        """After the last row: the chain must end where the head says it does (a cut-off tail is found), and
        reach the anchor's position."""
        if self.broken is None and self.anchor is not None and self.expected_seq - 1 < self.anchor.seq:
            self.broken = Break(self.expected_seq, None, f"truncated: the chain ends at position "
                                                         f"{self.expected_seq - 1}, before the anchored position "
                                                         f"{self.anchor.seq} ({iso(self.anchor.at)})")
        elif self.broken is None and head_seq != self.expected_seq - 1:
            self.broken = Break(self.expected_seq, None, f"missing: the chain's head is at position {head_seq}")
        elif self.broken is None and head_hash != self.prev_hash:
            self.broken = Break(head_seq, None, "the last row's hash is not the head's")
        return self.broken


@dataclass(frozen=True)
class AuditFilter:
    """Which audit rows a reader wants (all by default). `tool`: the request's action name; `person`:
    the actor (a Slack user id); `outcome`: the decision's outcome, on the rows that carry one."""

    since: datetime | None = None
    until: datetime | None = None
    tool: str | None = None
    person: str | None = None
    outcome: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class AuditEntry:
    """A row as the audit API and export show it: the chain row and its request's tool (None for a run's)."""

    row: ChainRow
    tool: str | None

    def to_json(self) -> dict[str, Any]:
        return {**self.row.to_json(), "tool": self.tool}
