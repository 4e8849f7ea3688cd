"""storage.json_codec.loads decodes exactly what json.loads decodes (it is only faster)."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from storage.json_codec import loads

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(values)
def test_decodes_what_json_decodes(value: object) -> None:
    text = json.dumps(value)
    assert loads(text) == json.loads(text)
    assert loads(text.encode()) == json.loads(text)


def test_integers_beyond_64_bits_stay_exact_integers() -> None:
    for n in (2**63, 2**64 + 1, -(2**70), 10**30):
        decoded = loads(json.dumps({"amount": n}))
        assert decoded == {"amount": n} and isinstance(decoded["amount"], int)


def test_nan_and_infinity_as_json_writes_them() -> None:
    decoded = loads(json.dumps([float("nan"), float("inf"), -float("inf")]))
    assert math.isnan(decoded[0]) and decoded[1:] == [float("inf"), -float("inf")]
