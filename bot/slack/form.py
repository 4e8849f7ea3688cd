"""Slack request bodies, parsed once and fast.

Interactive payloads arrive form-encoded: `payload=<the JSON, percent-encoded>`. A click's payload
carries the whole card it was clicked on, so it is 5-10 KB with an escape every few characters, and
`urllib.parse.parse_qsl` (pure Python, one dict lookup per escape) spent about 0.4 ms on each, twice
per click (the ack, then Bolt again): 10 % of the server's CPU in a burst of clicks.

`parse_body` gives exactly what Bolt's own `parse_body` gives. For the one common shape (a lone
`payload` field, ASCII, every `%` followed by two hex digits, no line breaks) it decodes the escapes
in C with `binascii.a2b_qp`: quoted-printable's `=XX` is the same escape with another lead
character, so `%` becomes `=` (after a literal `=` has become its own escape `=3D`) and `+` becomes
a space, as form encoding says. Under those conditions the mapping is exact; anything else (and any
bytes that are not UTF-8) goes to the standard parser, so the result never differs from Bolt's.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from typing import Any

from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.request.internals import parse_body as bolt_parse_body

from bot.domain.json_codec import loads

_PREFIX = "payload="


def parse_body(raw: str, content_type: str | None) -> dict[str, Any]:
    """The body as Bolt's `parse_body(raw, content_type)` reads it."""
    if raw.startswith(_PREFIX) and content_type != "application/json":
        fast = _payload(raw[len(_PREFIX):])
        if fast is not None:
            return fast
    return bolt_parse_body(raw, content_type)


def _payload(encoded: str) -> dict[str, Any] | None:
    if not encoded.isascii() or "&" in encoded or "\r" in encoded or "\n" in encoded:
        return None
    qp = encoded.replace("=", "=3D").replace("%", "=").replace("+", " ")
    raw = binascii.a2b_qp(qp.encode("ascii"))
    # a2b_qp turns each "=" and two hex digits into one byte and copies everything else, a "=" that
    # starts no escape included (a "=" at the very end it drops): so every "=" was a good escape
    # exactly when the text shrank by two characters per "=".
    if len(raw) != len(qp) - 2 * qp.count("="):
        return None
    try:
        value = loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None  # the standard parser decides (it replaces bad UTF-8; JSON errors are raised there)
    return value if isinstance(value, dict) else None


class _Parsed(AsyncBoltRequest):
    """Bolt's request with the body parsed by `parse_body` above: the raw body is kept (Bolt's
    signature check reads it), the parsed one is not worked out a second time."""

    def __init__(self, raw: str, query: str | Mapping[str, Any], headers: Mapping[str, Any]) -> None:
        super().__init__(body="", query=query, headers=headers)  # type: ignore[arg-type]
        self.raw_body = raw
        self.body = parse_body(raw, self.content_type)
        self.context = build_async_context(AsyncBoltContext({}), self.body)


def parsed_request(raw: str, query: str | Mapping[str, Any], headers: Mapping[str, Any]) -> AsyncBoltRequest:
    """`AsyncBoltRequest(body=raw, query=query, headers=headers)`, parsed once and fast."""
    return _Parsed(raw, query, headers)
