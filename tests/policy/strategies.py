"""Strategies shared by the policy-matching property tests (pure and over HTTP): a rule condition,
a value it matches, and the re-typings and re-formattings the API accepts for that value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from bot.domain.matching import ValueMatch

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=6)
FULL_WIDTH = {c: chr(ord(c) + 0xFEE0) for c in "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}


@dataclass(frozen=True)
class Case:
    """A condition (as the policy file writes it), its ValueMatch, and a value it matches exactly."""

    spec: dict[str, Any]
    condition: ValueMatch
    value: Any


def _case(spec: dict[str, Any], value: Any) -> Case:
    bounds = {k: float(v) for k, v in spec.items() if k in ("lt", "le", "gt", "ge")}
    any_of = (spec["equals"],) if "equals" in spec else tuple(spec["any_of"]) if "any_of" in spec else None
    return Case(spec, ValueMatch(any_of=any_of, glob=spec.get("glob"), **bounds), value)


@st.composite
def matched(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["equals", "any_of", "glob", "gt", "ge", "lt", "equals_number"]))
    if kind == "equals":
        word = draw(WORDS)
        return _case({"equals": word}, word)
    if kind == "any_of":
        words = draw(st.lists(WORDS, min_size=1, max_size=4, unique=True))
        return _case({"any_of": words}, draw(st.sampled_from(words)))
    if kind == "glob":
        stem = draw(WORDS)
        return _case({"glob": f"{stem}*"}, stem + draw(WORDS))
    if kind == "equals_number":
        number = draw(st.integers(1000, 10**7))
        return _case({"equals": number}, number)
    bound = draw(st.integers(0, 10**6))
    offset = draw(st.integers(1, 10**6))
    if kind == "lt":
        return _case({"lt": bound}, bound - offset)
    return _case({kind: bound}, bound + offset + 1000)


def _full_width(text: str) -> str:
    return "".join(FULL_WIDTH.get(c, c) for c in text)


def retyped(value: Any) -> st.SearchStrategy[Any]:
    """What an agent may send instead of `value` that a tool may still read as `value`."""
    other = st.one_of(WORDS, st.integers(-5, 5))
    ways: list[st.SearchStrategy[Any]] = [
        st.just([value]),
        st.tuples(st.lists(other, max_size=3), st.lists(other, max_size=3)).map(lambda p: [*p[0], value, *p[1]]),
        st.just({"value": value}),
    ]
    if isinstance(value, int):
        ways += [st.sampled_from([str(value), f"{value:,}", f"{value:_}", f"${value}", f"{value} USD",
                                  f"{value}.00", f"{value:,}".replace(",", " "), f"{value:e}", _full_width(str(value)),
                                  f"{value:,}".replace(",", "."), hex(value), f" {value} "])]
    if isinstance(value, str):
        ways += [st.sampled_from([value.upper(), value.title(), _full_width(value), f" {value}", value + "\u200b",
                                  value[:1] + "\u200d" + value[1:]])]
    return st.one_of(ways)


@st.composite
def placed(draw: st.DrawFn, value: Any) -> tuple[str, dict[str, Any], Any]:
    """A rule path and parameters that hold `value` at it, possibly spelled another way; and whether the
    spelling is exactly the rule's: True, False (another spelling of a key: one reading, at most UNKNOWN),
    or the other value that a second reading of the path names."""
    head, tail = draw(KEYS), draw(KEYS)
    decoy = draw(st.one_of(WORDS, st.integers(-5, 5)))
    way = draw(st.sampled_from(["plain", "nested", "dotted", "shadowed", "shadowing", "upper", "full_width"]))
    if way == "plain":
        return head, {head: value}, True
    path = f"{head}.{tail}"
    if way == "nested":
        return path, {head: {tail: value}}, True
    if way == "dotted":
        return path, {path: value}, True
    if way == "shadowed":  # a literal dotted key with another value hides the nested one from a naive lookup
        return path, {path: decoy, head: {tail: value}}, ("other", decoy)
    if way == "shadowing":
        return path, {path: value, head: {tail: decoy}}, ("other", decoy)
    if way == "upper":
        return head, {head.upper(): value}, head.upper() == head
    return head, {_full_width(head): value}, False
