"""JSON read (and written) by orjson wherever it gives exactly what the standard library gives.

Every request read decodes its JSON columns (parameters, preview, timing, timers, extra, ...): with
the standard library that was 30 % of a timer sweep's samples (`bench.sweep` under py-spy). orjson
decodes several times faster, but differs from `json` at the edges, which therefore go to `json`:
- integers beyond 64 bits: orjson reads them as floats, and a parameter must come back exactly as
  approved (its sha256 is bound to the decision). Text with a run of 19 or more digits goes to `json`.
- NaN, Infinity and anything else orjson refuses: `json` decides, as before.
Writing the database's columns stays `json.dumps` (its text is what the rows have always held).

`dumps` is for JSON bodies on the wire (Slack's Web API calls, the agent API's answers), where only
the value counts, not its spelling: orjson writes compact UTF-8 where `json.dumps` writes `", "`
and `\\uXXXX` escapes, but the text decodes to the same value. Where orjson would write another
VALUE or refuses, `json.dumps` writes it, as before:
- integers beyond 64 bits, datetimes, dataclasses and subclasses of str, int, dict and list:
  orjson refuses them, and `json.dumps` gives its own answer (the number, the subclass's value, or
  its TypeError). UUIDs and plain enums orjson writes where `json.dumps` raises; nothing sends them;
- NaN and Infinity, which orjson writes as `null`: any text with `null` in it goes to `json.dumps`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# A run of 19 digits, found by mapping every digit to "0" (bytes.translate, then a substring search:
# both in C). A regular expression looked at every position: 60-110 µs for a 7 KB click payload.
_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


_EXACT = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS \
    | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(value: Any) -> str:
    """JSON text of `value` that decodes to what `json.dumps(value)` decodes to (see the module's note)."""
    try:
        out = orjson.dumps(value, option=_EXACT)
    except TypeError:
        return json.dumps(value)
    if b"null" in out:
        return json.dumps(value)
    return out.decode()


def loads(text: str | bytes) -> Any:
    if isinstance(text, str):
        try:
            data = text.encode()
        except UnicodeEncodeError:  # lone surrogates, which orjson refuses anyway
            return json.loads(text)
    else:
        data = text
    if _LONG_RUN in data.translate(_DIGITS):
        return json.loads(data.decode())
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data.decode())
