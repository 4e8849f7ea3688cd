"""The agent API's bodies are decoded by orjson only where that gives exactly what `json.loads`
gives (bot.api.schemas._fast_loads); everything else takes the old path, with its old errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.api.schemas import _SLOW, _fast_loads, parse_body, CancelIn
from bot.errors import InvalidInput

SAMPLES = [
    b'{"a": 1, "b": [1.5, -0, 0.1, 1e300, 12345678901234567], "c": null, "d": true}',
    b'{"big": 123456789012345678901234567890}',  # past 64 bits: json's exact int
    b'{"f": 1e400}',  # json reads inf
    b'{"n": NaN}', b'{"n": Infinity}',
    b'{"s": "\\ud800"}',  # a lone surrogate: json reads it, the check after refuses it
    b'{"s": "\\ud83d\\ude00 \\u00e9 \xc3\xa9"}',
    b'\xef\xbb\xbf{"bom": 1}',
    '{"utf16": 1}'.encode("utf-16"),
    b'{"dup": 1, "dup": 2}',
    b'{"s": "\xff"}',
    b'[' * 300 + b']' * 300,
    b'{"a": ' + b'[' * 1500 + b']' * 1500 + b'}',
    b'"just a string"', b'[1, 2]', b'{"trailing": 1,}', b'{"ctl": "a\tb"}',
]


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (1 and 1.0 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


@pytest.mark.parametrize("raw", SAMPLES)
def test_fast_decoding_is_json_loads_or_steps_aside(raw: bytes) -> None:
    fast = _fast_loads(raw)
    if fast is _SLOW:
        return
    assert same(fast, json.loads(raw)), raw[:60]


def test_errors_are_the_old_ones() -> None:
    for raw, words in ((b'{"reason": NaN}', "NaN is not a JSON value"), (b'{"reason": "\\ud800"}', "not valid JSON"),
                       (b'{"reason": ' + b'[' * 1500 + b']' * 1500 + b'}', "nested too deeply")):
        with pytest.raises(InvalidInput) as caught:
            parse_body(CancelIn, raw)
        assert words in str(caught.value), (raw[:30], caught.value)
    assert parse_body(CancelIn, b'{"reason": "ok \\u00e9"}').reason == "ok é"
