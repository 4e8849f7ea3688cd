"""Bounded work on untrusted JSON: nesting limits, and JSON Schema regexes on a linear-time engine.

Invariants:
- Nothing here recurses on the input's own nesting before `too_deep` has bounded it (the check
  itself is iterative), so a 10,000-deep body is a clear refusal, never a RecursionError.
- `pattern`, `patternProperties` (and `additionalProperties`, which consults it) are matched with
  RE2, whose matching time is linear in the text: `^(a+)+$` against "aaaa...!" takes microseconds,
  not seconds of a stalled event loop. A pattern RE2 cannot run (back-references, look-around) is
  refused when the schema is submitted, with the reason.
- `unevaluatedProperties` next to `patternProperties` is refused: jsonschema would match those
  patterns with Python's backtracking engine there.
- `uniqueItems` costs n log n (jsonschema's falls back to comparing every pair when the items are
  not all of one sortable type: 16,000 mixed items took minutes).
- Under `budget(steps)` every keyword a validator applies is charged (a list keyword such as
  `uniqueItems` or `enum` by its length), and `BudgetExceeded` is raised once the steps run out: a
  small schema whose `anyOf`s and `$ref`s multiply (2^30 evaluations of one value) stops there.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import math
import time
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend

from bot.domain.formats import is_email

MAX_DEPTH = 32  # nesting of parameters and of a params_schema (objects and lists)
MAX_PATTERN_CHARS = 1000
MAX_SCHEMA_NODES = 5000  # objects, lists and values in one params_schema
EDIT_STEPS, EDIT_SECONDS = 100_000, 0.05  # the budget of checking a person's edit (in a Slack ack, on the loop)

_STEPS: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("schema_steps", default=None)


class BudgetExceeded(Exception):
    """Validation under `budget` ran out of steps."""


@contextlib.contextmanager
def budget(steps: int, seconds: float | None = None) -> Iterator[None]:
    """Validators of `linear` classes run in this block raise BudgetExceeded after `steps` steps, or
    once `seconds` have passed (a `$ref` costs more than a `type`: steps alone do not bound time)."""
    token = _STEPS.set([steps, time.monotonic() + seconds if seconds is not None else math.inf])
    try:
        yield
    finally:
        _STEPS.reset(token)


def _charge(cost: int) -> None:
    left = _STEPS.get()
    if left is not None:
        left[0] -= cost
        if left[0] < 0 or time.monotonic() > left[1]:
            raise BudgetExceeded


def _charged(keyword: Any) -> Any:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _charge(1 + (len(value) if isinstance(value, list) else 0) + (len(instance) if isinstance(instance, list | dict) else 0))
        return keyword(validator, value, instance, schema)
    return run


def count_nodes(value: Any, limit: int) -> int:
    """How many objects, lists and values `value` holds, counting no further than `limit` + 1."""
    stack, seen = [value], 0
    while stack and seen <= limit:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return seen


def _canonical(value: Any) -> Any:
    """A hashable key equal for values JSON calls equal (1 == 1.0, true != 1; keys in any order)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", value)  # hash(1) == hash(1.0), and they compare equal
    if isinstance(value, dict):
        return ("object", frozenset((k, _canonical(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(v) for v in value))
    return ("other", json.dumps(value, sort_keys=True, default=str))


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if unique and validator.is_type(instance, "array"):
        seen = set()
        for item in instance:
            key = _canonical(item)
            if key in seen:
                yield ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(key)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True if `value` nests objects/lists more than `limit` levels (checked without recursion)."""
    return too_deep_at(value, limit) is not None


def too_deep_at(value: Any, limit: int) -> list[str] | None:
    """The path (keys and indexes) to a container nested deeper than `limit`, or None."""
    stack: list[tuple[Any, list[str]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            children: Any = [(str(k), v) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            children = [(str(i), v) for i, v in enumerate(item)]
        else:
            continue
        if len(path) >= limit:
            return path
        stack.extend((child, [*path, key]) for key, child in children)
    return None


def nul_at(value: Any) -> list[str] | None:
    """The path (keys and indexes) to the first string or key holding U+0000, or None. No database
    here can store one (PostgreSQL's text and jsonb refuse it), so the API refuses it by name."""
    stack: list[tuple[Any, list[str]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if "\x00" in str(key):
                    return [*path, str(key).replace("\x00", "\\u0000")]
                stack.append((child, [*path, str(key)]))
        elif isinstance(item, list | tuple):
            stack.extend((child, [*path, str(i)]) for i, child in enumerate(item))
    return None


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def search(pattern: str, text: str) -> bool:
    return _compiled(pattern).search(text) is not None


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    stack = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def pattern_problem(schema: Any) -> str | None:
    """None if every regex in `schema` can run on RE2 and is short enough, else the reason."""
    has_pattern_properties = has_unevaluated = False
    for node in _walk(schema):
        patterns = []
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), dict):
            has_pattern_properties = True
            patterns.extend(node["patternProperties"])
        has_unevaluated = has_unevaluated or "unevaluatedProperties" in node
        for pattern in patterns:
            if len(pattern) > MAX_PATTERN_CHARS:
                return f"a pattern is longer than {MAX_PATTERN_CHARS} characters"
            try:
                _compiled(pattern)
            except re2.error as exc:
                reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
                return (f"pattern {pattern[:80]!r} is not supported ({reason}); patterns run on RE2: "
                        "no back-references or look-around")
    if has_pattern_properties and has_unevaluated:
        return "unevaluatedProperties cannot be combined with patternProperties here"
    return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in properties and not any(search(p, k) for p in patterns)]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        shown = ", ".join(repr(k) for k in sorted(extras))
        yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")


def _regex_format(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    try:
        _compiled(instance)
    except re2.error:
        return False
    return True


@functools.cache
def linear(cls: Any) -> Any:
    """`cls` (a jsonschema validator class) with its regex keywords on RE2."""
    checker = FormatChecker()
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checkers["regex"] = (_regex_format, ())
    checker.checkers["email"] = (is_email, ())  # jsonschema's own only looks for an "@" (bot/domain/formats.py)
    keywords = {**cls.VALIDATORS, "pattern": _pattern, "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties, "uniqueItems": _unique_items}
    extended = extend(cls, validators={name: _charged(fn) for name, fn in keywords.items()},  # type: ignore[no-untyped-call]
                      format_checker=checker)
    return extended
