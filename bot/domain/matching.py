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

import fnmatch
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from bot.domain.readings import (MATCH as MATCH, NO as NO, UNKNOWN as UNKNOWN, Number, Option, Verdict as Verdict,
                                 all_agree, fold, is_number, json_text, normal, numbers)

MAX_PARTS = 1000  # elements of a list or object judged one by one; past that the value is UNKNOWN


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
            options = tuple(Option.of(v) for v in self.any_of)
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
        if is_number(value) or isinstance(value, bool):
            test = self._glob.match if glob else self._regex.search
            return UNKNOWN if any(test(t) is not None for t in json_text(value)) else NO
        return NO

    def _compare(self, value: Any) -> Verdict:
        if is_number(value):
            if isinstance(value, float) and math.isnan(value):
                return UNKNOWN
            return MATCH if self._holds(value) else NO
        if isinstance(value, bool):
            return UNKNOWN if self._holds(int(value)) else NO  # true/false as 1/0: another type, at most UNKNOWN
        if isinstance(value, str):
            read = numbers(value)
            return UNKNOWN if read is None else all_agree(read, self._holds)
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
