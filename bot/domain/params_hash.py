"""What an approval is bound to: the SHA-256 of the approved parameters as canonical JSON.

Self-contained on purpose (standard library only, no project imports): an agent-side client
(the `signoff/` package, or any script) may copy this file as it is and check, right before it
runs a tool, that it runs exactly what a person approved:

    from params_hash import check_params
    decision = signoff_response["decision"]            # or an item of decision["items"]
    check_params(decision, params_i_am_about_to_run)   # raises ParamsChanged if they differ

Canonical JSON: `json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`
encoded as UTF-8. Key order and whitespace therefore never change the hash; any change of a
value, a key or a type (1 vs 1.0 vs "1") does. Signoff's own runner does the same check.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


class ParamsChanged(ValueError):
    """The parameters about to run are not the ones that were approved."""


def canonical_json(params: Any) -> bytes:
    """The bytes that are hashed: sorted keys, no whitespace, UTF-8 (not \\u-escaped)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def params_sha256(params: Any) -> str:
    """Hex SHA-256 of `canonical_json(params)`: the `params_sha256` of a decision."""
    return hashlib.sha256(canonical_json(params)).hexdigest()


def check_params(decision: Mapping[str, Any], params: Any) -> None:
    """Raise ParamsChanged unless `params` hash to the decision's `params_sha256`.

    `decision` is a decision as the API returns it (or one of its `items`); it must be approved.
    Fails closed: a decision without a hash, or not approved, never lets anything run.
    """
    outcome = decision.get("outcome")
    if outcome != "approved":
        raise ParamsChanged(f"the decision is {outcome!r}, not 'approved': nothing may run")
    expected = decision.get("params_sha256")
    if not isinstance(expected, str) or not expected:
        raise ParamsChanged("the decision carries no params_sha256")
    actual = params_sha256(params)
    if actual != expected:
        raise ParamsChanged(f"parameters differ from the approved ones (sha256 {actual[:12]}… != {expected[:12]}…)")
