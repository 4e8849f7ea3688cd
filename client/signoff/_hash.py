"""The SHA-256 a decision binds its approved parameters to (the server's bot/domain/params_hash.py).

Canonical JSON: sorted keys, no whitespace, UTF-8, not \\u-escaped. Kept here rather than imported:
the agent side never imports the server.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def params_sha256(params: Any) -> str:
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
