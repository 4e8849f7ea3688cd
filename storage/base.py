"""The storage interface in one import: what a use case or an engine needs, each defined in the module
named for what it holds.

    storage/store.py    `Store`: everything Signoff keeps; `AuditTail`
    storage/unit.py     `Unit`: one transaction and what may be written in it; `Expect`, `Change`
    storage/records.py  the values passed beside the domain's (`CardPosted`, `DueRow`, `Reminded`, `Inbox`)
    storage/errors.py   `StorageError`, `DuplicateIdempotencyKey`, `StaleRead`

The run store's interface is storage/run_store.py's (`RunStore`, `RunUnit`).
"""

from __future__ import annotations

from storage.errors import DuplicateIdempotencyKey, StaleRead, StorageError
from bot.domain.inbox import Inbox, InboxEntry
from bot.domain.outbox import CardPosted
from storage.records import DueRow, Reminded
from storage.store import AuditTail, Store
from storage.unit import CARD_TS_TRIES, Change, Expect, T, Unit

__all__ = ["CARD_TS_TRIES", "AuditTail", "CardPosted", "Change", "DueRow", "DuplicateIdempotencyKey", "Expect",
           "Inbox", "InboxEntry", "Reminded", "StaleRead", "StorageError", "Store", "T", "Unit"]
