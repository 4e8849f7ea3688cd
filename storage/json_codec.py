"""Decoding the database's JSON columns: orjson where it gives exactly what `json.loads` gives.

Every request read decodes its JSON columns (parameters, preview, timing, timers, extra, ...): with
the standard library that was 30 % of a timer sweep's samples (`bench.sweep` under py-spy). orjson
decodes several times faster, but differs from `json` at the edges, which therefore go to `json`:
- integers beyond 64 bits: orjson reads them as floats, and a parameter must come back exactly as
  approved (its sha256 is bound to the decision). Text with a run of 19 or more digits goes to `json`.
- NaN, Infinity and anything else orjson refuses: `json` decides, as before.
Writing stays `json.dumps` (orjson writes NaN as null and cannot write big integers).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_NUMBER = re.compile(r"\d{19}")


def loads(text: str | bytes) -> Any:
    if isinstance(text, bytes):
        text = text.decode()
    if _LONG_NUMBER.search(text):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
