"""How a rule's parameter condition reads a call's value: MATCH, NO, or UNKNOWN. Pure.

A condition (`ValueMatch`: equals/any_of, glob, regex, lt/le/gt/ge) judges the value at a path of
the call's parameters (`ParamPath`). The answer is three-valued, and UNKNOWN means "this value could
be read so that it matches, or cannot be read at all": the caller decides what UNKNOWN counts as.
Deny and ask rules count it as a match (fail closed: more scrutiny); allow rules and remembered
grants never do; a tier-only rule counts it only to raise the tier (`bot.domain.policy`).

The readings of a value, for a condition that expects one value of one type:

- Types. A JSON number and its plain decimal text (`[+-]?digits[.digits]`, no leading zeros, ASCII
  digits, surrounding spaces ignored) are the same number: MATCH or NO. Text that holds a digit in
  any other form ("5,000", "5 000", "$5000", "5e3", "0x1F4", "5000.00 USD", full-width digits,
  "007") and "inf"/"infinity" is UNKNOWN under a comparison, and under equality with a number;
  "1.500" reads as 1.5 and as 1500 (a thousands dot), so it is MATCH or NO only when both readings
  agree. Text without digits ("ten", "nan") is NO. A boolean under a comparison or equality with a
  number reads as 1/0, and a number or "true"/"yes"/"1"... under equality with a boolean reads as
  one: at most UNKNOWN (another type never MATCHes). A number or boolean under glob/regex is
  UNKNOWN when its JSON text matches. null is NO unless the rule names null.
- Lists and objects where one value is expected: the condition is judged on every element (an
  object's keys and values, nested, up to MAX_PARTS of them; past that, UNKNOWN); UNKNOWN when
  any element matches or is UNKNOWN, else NO. A list or object equal to one the rule names is MATCH.
- Text. Exact text is MATCH (globs are case-insensitive, as before). Text that equals (any_of) or
  fits the glob only after `fold` (Unicode NFKC, invisible format characters such as zero-width
  spaces removed, surrounding spaces stripped, casefolded) is UNKNOWN. A regex keeps its own case
  rule (`(?i)` in the pattern): it is also tried on the NFKC text with invisible characters
  removed and spaces stripped, never casefolded (a case-sensitive negative pattern such as
  `^(?!DE)` would otherwise deny every "DE..." value); a match there is UNKNOWN.
- Paths. `a.b.c` is read every way its dots can split into keys ("a.b" then "c", "a" then "b.c",
  ...), each key also under `fold`. One reading, spelled exactly: its verdict. Several readings:
  MATCH if all MATCH, UNKNOWN if any is MATCH or UNKNOWN, else NO. A reading through a key spelled
  another way ("ENV", "ｅｎｖ" for `env`) is at most UNKNOWN. No reading: NO (the rule does not
  apply to a call without the parameter).

Cost: keys are folded once per call (`Params`), a folded string is memoised per call, ASCII text
skips Unicode normalisation, and a path with no dots and no other spelling is one dict lookup.
"""

from __future__ import annotations

import enum
import fnmatch
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any

_MISSING = object()
MAX_PARTS = 1000  # elements of a list or object judged one by one; past that the value is UNKNOWN


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


def _json_text(value: Any) -> tuple[str, ...]:
    """How a number or boolean reads as text (for glob and regex)."""
    if isinstance(value, bool):
        return ("true", "True") if value else ("false", "False")
    if isinstance(value, float) and value.is_integer():
        return repr(value), str(int(value))
    return (json.dumps(value) if isinstance(value, float) else str(value),)


def _is_number(value: Any) -> bool:
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


def _all_agree(readings: tuple[Number, ...], test: Callable[[Number], bool]) -> Verdict:
    hits = [test(n) for n in readings]
    if hits and all(hits):
        return MATCH
    return UNKNOWN if any(hits) else NO


def _bool_reading(value: Any, folder: Callable[[str], str]) -> bool | None:
    """A number or text read as a boolean, if it reads as one."""
    if _is_number(value):
        return bool(value) if not (isinstance(value, float) and math.isnan(value)) else None
    if isinstance(value, str):
        word = folder(value)
        return True if word in _TRUE_WORDS else False if word in _FALSE_WORDS else None
    return None


@dataclass(frozen=True)
class _Option:
    """One value an any_of/equals names, prepared for the readings above."""

    value: Any
    folded: str | None = None  # a text option, folded
    number: Number | None = None  # a number option, or a text option that is a plain number

    @classmethod
    def of(cls, value: Any) -> _Option:
        if isinstance(value, str):
            read = numbers(value)
            return cls(value, fold(value), read[0] if read and len(read) == 1 else None)
        return cls(value, None, value if _is_number(value) else None)

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
                verdict = _all_agree(read, lambda n: n == self.number)
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
        if _is_number(value):
            if self.number is not None:
                return MATCH if value == self.number else NO  # a number and its plain text are one value
            if isinstance(option, bool):
                return UNKNOWN if _bool_reading(value, folder) is option else NO
            return NO
        if isinstance(option, list) and len(option) == 1 and not isinstance(value, list):
            return min(_Option.of(option[0]).same(value, folder), UNKNOWN)  # [x] where x was sent
        return NO


@dataclass(frozen=True)
class ValueMatch:
    """One parameter's condition; every part given must hold (an empty ValueMatch matches anything present).

    `any_of`: equal to one of these values (exact match is any_of with one value). `glob`: a
    case-insensitive shell pattern on a string. `regex`: `re.search` on a string. lt/le/gt/ge:
    numeric comparisons (numbers, or strings that read as numbers). `judge` gives MATCH, NO or
    UNKNOWN (see the module docstring); `matches` is MATCH only (what an allow needs).
    """

    any_of: tuple[Any, ...] | None = None
    glob: str | None = None
    regex: str | None = None
    lt: float | None = None
    le: float | None = None
    gt: float | None = None
    ge: float | None = None
    _glob: Any = field(default=None, init=False, repr=False, compare=False)
    _glob_folded: Any = field(default=None, init=False, repr=False, compare=False)
    _regex: Any = field(default=None, init=False, repr=False, compare=False)
    _strings: Any = field(default=None, init=False, repr=False, compare=False)
    _options: Any = field(default=None, init=False, repr=False, compare=False)
    _bounded: bool = field(default=False, init=False, repr=False, compare=False)
    _structured: bool = field(default=False, init=False, repr=False, compare=False)
    _glob_only: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.glob is not None:
            object.__setattr__(self, "_glob", _glob_regex(self.glob))
            if not self.glob.isascii():  # an ASCII pattern under IGNORECASE already reads ASCII text folded
                object.__setattr__(self, "_glob_folded", _glob_regex(fold(self.glob)))
        if self.regex is not None:
            object.__setattr__(self, "_regex", re.compile(self.regex))  # re.error: the loader reports it
        if self.any_of is not None:
            options = tuple(_Option.of(v) for v in self.any_of)
            if all(isinstance(v, str) for v in self.any_of) and all(o.number is None for o in options):
                # text options, none a number: a text value is one hash lookup, then one on its folded form
                object.__setattr__(self, "_strings", (frozenset(self.any_of), frozenset(o.folded for o in options)))
            object.__setattr__(self, "_options", options)
            object.__setattr__(self, "_structured", any(isinstance(v, list | dict) for v in self.any_of))
        object.__setattr__(self, "_bounded", any(b is not None for b in (self.lt, self.le, self.gt, self.ge)))
        object.__setattr__(self, "_glob_only", self.glob is not None and self.glob.isascii() and self.any_of is None
                           and self.regex is None and not self._bounded)

    def matches(self, value: Any) -> bool:
        return self.judge(value) is MATCH

    def judge(self, value: Any, folder: Callable[[str], str] = fold) -> Verdict:
        if type(value) is str:
            return self._whole(value, folder)
        if isinstance(value, list | Mapping):
            verdict = self._whole(value, folder) if self._structured else NO
            if verdict is MATCH:
                return MATCH
            for count, part in enumerate(_parts(value)):
                if count >= MAX_PARTS:
                    return UNKNOWN
                if self._whole(part, folder) is not NO:
                    return UNKNOWN  # one element could be the value the rule means
            return verdict
        return self._whole(value, folder)

    def _whole(self, value: Any, folder: Callable[[str], str]) -> Verdict:
        if self._glob_only and type(value) is str and value.isascii() and value == value.strip():
            return MATCH if self._glob.match(value) is not None else NO  # ASCII: IGNORECASE is the fold
        verdict = MATCH
        if self._options is not None:
            if self._strings is not None and type(value) is str:
                if value not in self._strings[0]:
                    if folder(value) not in self._strings[1]:
                        return NO
                    verdict = UNKNOWN
            else:
                verdict = max((o.same(value, folder) for o in self._options), default=NO)
                if verdict is NO:
                    return NO
        if self._glob is not None:
            verdict = min(verdict, self._text(value, folder, glob=True))
            if verdict is NO:
                return NO
        if self._regex is not None:
            verdict = min(verdict, self._text(value, folder, glob=False))
            if verdict is NO:
                return NO
        if self._bounded:
            verdict = min(verdict, self._compare(value))
        return verdict

    def _text(self, value: Any, folder: Callable[[str], str], *, glob: bool) -> Verdict:
        if isinstance(value, str):
            if (self._glob.match(value) if glob else self._regex.search(value)) is not None:
                return MATCH
            if glob:
                if value.isascii() and self._glob_folded is None and value == value.strip():
                    return NO  # folding changes nothing IGNORECASE has not already
                pattern = self._glob_folded or self._glob
                return UNKNOWN if pattern.match(folder(value)) is not None else NO
            if value.isascii() and value == value.strip():
                return NO
            return UNKNOWN if self._regex.search(normal(value)) is not None else NO
        if _is_number(value) or isinstance(value, bool):
            test = self._glob.match if glob else self._regex.search
            return UNKNOWN if any(test(t) is not None for t in _json_text(value)) else NO
        return NO

    def _compare(self, value: Any) -> Verdict:
        if _is_number(value):
            if isinstance(value, float) and math.isnan(value):
                return UNKNOWN
            return MATCH if self._holds(value) else NO
        if isinstance(value, bool):
            return UNKNOWN if self._holds(int(value)) else NO  # true/false as 1/0: another type, at most UNKNOWN
        if isinstance(value, str):
            read = numbers(value)
            return UNKNOWN if read is None else _all_agree(read, self._holds)
        return NO

    def _holds(self, number: Number) -> bool:
        return ((self.lt is None or number < self.lt) and (self.le is None or number <= self.le)
                and (self.gt is None or number > self.gt) and (self.ge is None or number >= self.ge))

    def describe(self) -> str:
        """The condition in the policy file's words: `gt 1000`, `glob 'prod*'`, `any_of ['a', 'b']`."""
        parts = []
        if self.any_of is not None:
            parts.append(f"equals {self.any_of[0]!r}" if len(self.any_of) == 1 else f"any_of {list(self.any_of)!r}")
        parts += [f"{name} {getattr(self, name)!r}" for name in ("glob", "regex") if getattr(self, name) is not None]
        parts += [f"{name} {_plain(getattr(self, name))}" for name in ("lt", "le", "gt", "ge")
                  if getattr(self, name) is not None]
        return ", ".join(parts) or "anything"


def _plain(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern), re.IGNORECASE)


def _parts(value: Any) -> Iterator[Any]:
    """Every scalar inside a list or object (an object's keys too), depth first, lazily."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                yield key
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            yield item


# -- paths ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamPath:
    """A rule's parameter path, with every way its dots split it: (first key, that key folded, the rest)."""

    text: str
    splits: tuple[tuple[str, str, ParamPath | None], ...]
    simple: bool = False  # no dots, and already in folded form: in parameters whose keys all are, one lookup

    @staticmethod
    @lru_cache(maxsize=4096)
    def of(text: str) -> ParamPath:
        ends = [i for i, c in enumerate(text) if c == "."] + [len(text)]
        return ParamPath(text, tuple(
            (text[:end], fold(text[:end]), ParamPath.of(text[end + 1:]) if end < len(text) else None) for end in ends),
            simple="." not in text and fold(text) == text)


class Params:
    """A call's parameters as rules read them: each object's keys folded once, folded text memoised.

    Made once per evaluation step and dropped after (the parameters are not copied: do not change
    them while one is in use)."""

    __slots__ = ("params", "_keys", "_folded", "_plain")

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params
        self._keys: dict[int, dict[str, list[str]]] = {}
        self._folded: dict[int, tuple[str, str]] = {}
        self._plain: bool | None = None  # every top-level key is a str without dots, in folded form

    def _all_plain(self) -> bool:
        if self._plain is None:
            self._plain = all(type(k) is str and "." not in k and k.isascii() and k == k.strip().lower()
                              for k in self.params)
        return self._plain

    def fold(self, text: str) -> str:
        if text.isascii() and len(text) < 64:
            return text.strip().lower()
        found = self._folded.get(id(text))
        if found is None or found[0] is not text:
            found = self._folded[id(text)] = (text, fold(text))
        return found[1]

    def _index(self, mapping: Mapping[str, Any]) -> dict[str, list[str]]:
        index = self._keys.get(id(mapping))
        if index is None:
            index = self._keys[id(mapping)] = {}
            for key in mapping:
                if isinstance(key, str):
                    index.setdefault(self.fold(key), []).append(key)
        return index

    def readings(self, path: ParamPath) -> list[tuple[Any, bool]]:
        """Every value `path` can name, and whether it is spelled exactly so (no other spelling of a key)."""
        found: list[tuple[Any, bool]] = []
        self._read(self.params, path, True, found)
        return found

    def _read(self, mapping: Mapping[str, Any], path: ParamPath, exact: bool, found: list[tuple[Any, bool]]) -> None:
        index = self._index(mapping)
        for key, folded, rest in path.splits:
            for name in index.get(folded, ()):
                value = mapping[name]
                if rest is None:
                    found.append((value, exact and name == key))
                elif isinstance(value, Mapping):
                    self._read(value, rest, exact and name == key, found)

    def judge(self, path: ParamPath, condition: ValueMatch) -> Verdict:
        """The condition on every reading of the path: see the module docstring."""
        if path.simple and self._all_plain():  # the one reading there can be: no other spelling, no dots
            value = self.params.get(path.text, _MISSING)
            return NO if value is _MISSING else condition.judge(value, self.fold)
        readings = self.readings(path)
        if not readings:
            return NO
        verdict = condition.judge(readings[0][0], self.fold)
        if not readings[0][1]:
            verdict = min(verdict, UNKNOWN)
        if len(readings) == 1:
            return verdict
        low = high = verdict
        for value, exact in readings[1:]:
            one = condition.judge(value, self.fold)
            if not exact:
                one = min(one, UNKNOWN)
            low, high = min(low, one), max(high, one)
        return MATCH if low is MATCH else min(high, UNKNOWN)

    def explain(self, path: ParamPath, condition: ValueMatch) -> str | None:
        """Why the condition is UNKNOWN on this path, in plain words (None: it is not)."""
        readings = self.readings(path)
        if self.judge(path, condition) is not UNKNOWN:
            return None
        against = condition.describe()
        if len(readings) > 1:
            shown = ", ".join(_short(v) for v, _ in readings[:4])
            return (f"the path {path.text} names more than one value ({shown}: a literal dotted key, a nested "
                    f"object or another spelling of a key), so it could not be judged against {against}")
        value, exact = readings[0]
        if not exact:
            return f"{path.text} is spelled another way in the call, so {_short(value)} could not be judged against {against}"
        what = ("a list where one value is expected" if isinstance(value, list)
                else "an object where one value is expected" if isinstance(value, Mapping)
                else "another type than the rule expects" if not isinstance(value, str)
                else "a number written in another format, or with more than one reading"
                if len(numbers(value) or (0, 0)) > 1
                else "text that differs only in case, Unicode form or invisible characters")
        return f"{path.text} {_short(value)} could not be judged against {against} ({what})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
