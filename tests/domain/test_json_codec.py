"""bot.domain.json_codec.loads decodes exactly what json.loads decodes (it is only faster)."""

from __future__ import annotations

import pytest

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from bot.domain.json_codec import dumps, loads

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.property
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


# ---------------------------------------------------------------- dumps (JSON bodies on the wire)

wire_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (json writes NaN and reads it back as a NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.mark.property
@given(wire_values)
def test_dumps_writes_what_json_dumps_writes(value: object) -> None:
    """The text may be spelled differently (compact, UTF-8); it decodes to the same value."""
    assert same(json.loads(dumps(value)), json.loads(json.dumps(value)))


def test_dumps_leaves_the_edges_to_json() -> None:
    for value in ({"amount": 2**70}, [float("nan"), float("inf")], {"n": None}, {1: "a", None: "b"}):
        assert same(json.loads(dumps(value)), json.loads(json.dumps(value)))
    assert dumps({"amount": 2**70}) == json.dumps({"amount": 2**70})  # orjson refuses it
    assert "NaN" in dumps([float("nan")])  # not orjson's null


def test_dumps_refuses_what_json_refuses() -> None:
    import datetime
    import pytest

    with pytest.raises(TypeError):
        dumps({"at": datetime.datetime(2026, 1, 1)})


def test_dumps_writes_subclasses_by_their_value() -> None:
    import enum

    class Colour(str, enum.Enum):
        RED = "red"

    assert json.loads(dumps({"c": Colour.RED})) == {"c": "red"}


def test_a_cards_text_is_written_by_orjson() -> None:
    """The common case (strings, numbers, no null) is orjson's compact text, not json's."""
    assert dumps({"text": "Zoë", "n": [1, 2]}) == '{"text":"Zoë","n":[1,2]}'
