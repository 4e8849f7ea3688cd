"""The errors a store raises, and the one a write raises when a read it relied on moved.

    StorageError
      +-- DuplicateIdempotencyKey   another request already holds the key
    StaleRead                       a write's `Expect` no longer holds: the unit is to be rolled back
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of the errors a store raises; `code` is a short machine-readable name."""

    code = "storage_error"


class DuplicateIdempotencyKey(StorageError):
    """Another request already holds the idempotency key."""

    code = "idempotency_key_taken"


class StaleRead(Exception):
    """A write found a read its caller relied on out of date (`Expect`): the unit is to be rolled back."""

