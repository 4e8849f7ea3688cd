"""How a call's value reads for a rule's condition (bot/domain/matching.py): text as shown (`normal`) and
folded (`fold`), the numbers text can mean (`numbers`), a number or boolean as text, a value as a boolean,
and one option of an any_of compared with a value. Every answer is a `Verdict`: MATCH, NO or UNKNOWN.
Pure."""

from __future__ import annotations

import enum
import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any


class Verdict(enum.IntEnum):
    """Ordered: `min` is "all of", `max` is "any of"."""

    NO = 0
    UNKNOWN = 1
    MATCH = 2


NO, UNKNOWN, MATCH = Verdict.NO, Verdict.UNKNOWN, Verdict.MATCH

# Invisible characters a display drops but `str` keeps: format characters (Cf: zero-width space and
# joiners, direction marks and overrides, soft hyphen, BOM) and variation selectors.
_INVISIBLE = re.compile(r"[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
                        r"\ufe00-\ufe0f\U000e0000-\U000e007f]")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", re.ASCII)
_THOUSANDS_DOT = re.compile(r"[+-]?[1-9][0-9]{0,2}\.[0-9]{3}", re.ASCII)
_ANY_DIGIT = re.compile(r"\d")  # any script's digits (str patterns are Unicode-aware)
_INFINITE = frozenset({"inf", "infinity", "∞"})
_TRUE_WORDS = frozenset({"true", "1", "yes", "y", "on", "t"})
_FALSE_WORDS = frozenset({"false", "0", "no", "n", "off", "f"})
_NULL_WORDS = frozenset({"null", "none", "nil"})

Number = int | float | Decimal


def normal(text: str) -> str:
    """NFKC, invisible characters removed, surrounding spaces stripped; case kept."""
    if text.isascii():
        return text.strip()
    return unicodedata.normalize("NFKC", _INVISIBLE.sub("", text)).strip()


def fold(text: str) -> str:
    """`normal`, then casefolded (and NFKC again: casefolding can leave text unnormalised)."""
    if text.isascii():
        return text.strip().lower()
    return unicodedata.normalize("NFKC", normal(text).casefold())


def numbers(text: str) -> tuple[Number, ...] | None:
    """The numbers `text` reads as: one for plain decimal text, two for "1.500" (1.5, or 1500 with a
    thousands dot), none for text without digits ("ten", "nan"); None when it looks like a number
    written some other way ("5,000", "5e3", "$5", "５", "0x1F"), which cannot be judged."""
    plain = text.strip()
    if _PLAIN_NUMBER.fullmatch(plain):
        value: Number = int(plain) if "." not in plain and len(plain) < 1000 else Decimal(plain)
        if _THOUSANDS_DOT.fullmatch(plain):
            return value, int(plain.replace(".", ""))
        return (value,)
    folded = fold(text)
    if _ANY_DIGIT.search(folded) or folded.lstrip("+-") in _INFINITE:
        return None
    return ()


def json_text(value: Any) -> tuple[str, ...]:
    """How a number or boolean reads as text (for glob and regex)."""
    if isinstance(value, bool):
        return ("true", "True") if value else ("false", "False")
    if isinstance(value, float) and value.is_integer():
        return repr(value), str(int(value))
    return (json.dumps(value) if isinstance(value, float) else str(value),)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: Any, b: Any) -> bool:
    """Equal as JSON values: booleans are not numbers, 1 == 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, list | tuple | Mapping) or isinstance(b, list | tuple | Mapping):
        return False
    return bool(a == b)


def all_agree(readings: tuple[Number, ...], test: Callable[[Number], bool]) -> Verdict:
    hits = [test(n) for n in readings]
    if hits and all(hits):
        return MATCH
    return UNKNOWN if any(hits) else NO


def _bool_reading(value: Any, folder: Callable[[str], str]) -> bool | None:
    """A number or text read as a boolean, if it reads as one."""
    if is_number(value):
        return bool(value) if not (isinstance(value, float) and math.isnan(value)) else None
    if isinstance(value, str):
        word = folder(value)
        return True if word in _TRUE_WORDS else False if word in _FALSE_WORDS else None
    return None


@dataclass(frozen=True)
class Option:
    """One value an any_of/equals names, prepared for the readings above."""

    value: Any
    folded: str | None = None  # a text option, folded
    number: Number | None = None  # a number option, or a text option that is a plain number

    @classmethod
    def of(cls, value: Any) -> Option:
        if isinstance(value, str):
            read = numbers(value)
            return cls(value, fold(value), read[0] if read and len(read) == 1 else None)
        return cls(value, None, value if is_number(value) else None)

    def same(self, value: Any, folder: Callable[[str], str]) -> Verdict:
        """Whether `value` (a scalar, or a structure) equals this option."""
        option = self.value
        if _json_equal(option, value):
            return MATCH
        if isinstance(value, str):
            if self.folded is not None and folder(value) == self.folded:
                return UNKNOWN
            if self.number is not None:
                read = numbers(value)
                if read is None:
                    return UNKNOWN
                verdict = all_agree(read, lambda n: n == self.number)
                return min(verdict, UNKNOWN) if isinstance(option, str) else verdict  # text vs text: not exact
            if isinstance(option, bool) or option is None:
                word = folder(value)
                if option is None:
                    return UNKNOWN if word in _NULL_WORDS else NO
                return UNKNOWN if _bool_reading(value, folder) is option else NO
            return NO
        if isinstance(value, bool):
            if self.number is not None:
                return UNKNOWN if int(value) == self.number else NO
            if self.folded is not None:
                return UNKNOWN if _bool_reading(option, folder) is value else NO
            return NO
        if is_number(value):
            if self.number is not None:
                return MATCH if value == self.number else NO  # a number and its plain text are one value
            if isinstance(option, bool):
                return UNKNOWN if _bool_reading(value, folder) is option else NO
            return NO
        if isinstance(option, list) and len(option) == 1 and not isinstance(value, list):
            return min(Option.of(option[0]).same(value, folder), UNKNOWN)  # [x] where x was sent
        return NO
