"""A rule's parameter path (`ParamPath`: every way its dots split it) and a call's parameters as rules read
them (`Params`: keys folded once per call), judging a condition on every reading of a path. Pure.
The rules of reading are bot/domain/matching.py's module docstring."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bot.domain.matching import ValueMatch
from bot.domain.readings import MATCH, NO, UNKNOWN, Verdict, fold, numbers

_MISSING = object()



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
