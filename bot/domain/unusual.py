"""What is unusual about a call compared with its tool's approved history. Pure: no I/O, no model.

These facts are computed here, by Signoff, and handed to the model that writes a card's AI note
(bot/domain/assist.py); the model only words them. Each fact is a short line a person can check:

- the tool's first approved request in the window ("no approved requests in the last 30 days");
- a recipient domain never approved before (any e-mail address in the parameters, at any depth);
- an amount ten times (or more) the median of the same parameter's approved values;
- a file outside the folders approved before (a parameter holding a path).

A fact needs evidence: at least `min_history` approved values of the same kind; with less there is
nothing to compare against and nothing is said. Values quoted in a fact come from the agent: they are
clipped, and the prompt marks them as data (they are never instructions).
"""

from __future__ import annotations

import posixpath
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Facts", "unusual", "AMOUNT_FACTOR"]

AMOUNT_FACTOR = 10
QUOTED_MAX = 60
_EMAIL = re.compile(r"[A-Za-z0-9._%+\-]+@([A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)+)")
_NUMBER = re.compile(r"^\s*[$€£]?\s*(-?\d{1,3}(?:,\d{3})+|-?\d+)(\.\d+)?\s*$")
_PATH_KEYS = re.compile(r"(path|file|folder|dir|directory|dest|destination|target)s?$", re.IGNORECASE)
_DEPTH = 3  # how deep nested parameters are looked into


@dataclass(frozen=True)
class Facts:
    """What history says about one call: `lines` (plain sentences) and the counts behind them."""

    tool: str
    approved: int  # approved requests of the tool in the window
    days: int
    lines: tuple[str, ...]

    @property
    def unusual(self) -> bool:
        return bool(self.lines)


def unusual(tool: str, params: Mapping[str, Any], approved: Sequence[Mapping[str, Any]], *, days: int,
            min_history: int = 3) -> Facts:
    """The facts about `params` of a call of `tool`, against the parameters of its `approved` calls."""
    lines: list[str] = []
    if not approved:
        lines.append(f"{tool} has no approved requests in the last {days} days: nothing to compare with.")
        return Facts(tool, 0, days, tuple(lines))
    lines += _domains(params, approved, min_history)
    lines += _amounts(params, approved, min_history)
    lines += _folders(params, approved, min_history)
    return Facts(tool, len(approved), days, tuple(lines))


def quoted(value: str) -> str:
    """An agent's value inside a fact: on one line, clipped, in quotes."""
    flat = " ".join(str(value).split())
    return '"' + (flat if len(flat) <= QUOTED_MAX else flat[: QUOTED_MAX - 1] + "…") + '"'


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif depth < _DEPTH and isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif depth < _DEPTH and isinstance(value, (list, tuple)):
        for v in value[:100]:
            yield from _strings(v, depth + 1)


def _domains_of(params: Mapping[str, Any]) -> set[str]:
    return {m.group(1).lower() for s in _strings(params) for m in _EMAIL.finditer(s[:10_000])}


def _domains(params: Mapping[str, Any], approved: Sequence[Mapping[str, Any]], min_history: int) -> list[str]:
    now = _domains_of(params)
    with_any = [d for d in (_domains_of(p) for p in approved) if d]
    if not now or len(with_any) < min_history:
        return []
    seen: set[str] = set()
    for domains in with_any:
        seen |= domains
    new = sorted(now - seen)
    if not new:
        return []
    before = ", ".join(quoted(d) for d in sorted(seen)[:3]) + (" and others" if len(seen) > 3 else "")
    which = ", ".join(quoted(d) for d in new[:3])
    return [f"New recipient domain {which}: approved requests went only to {before}."]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        found = _NUMBER.match(value)
        if found:
            return float(found.group(1).replace(",", "") + (found.group(2) or ""))
    return None


def _amounts(params: Mapping[str, Any], approved: Sequence[Mapping[str, Any]], min_history: int) -> list[str]:
    lines = []
    for name, value in params.items():
        number = _number(value)
        if number is None:
            continue
        past = [n for n in (_number(p.get(name)) for p in approved) if n is not None]
        if len(past) < min_history:
            continue
        median = statistics.median(past)
        if median > 0 and number >= AMOUNT_FACTOR * median:
            lines.append(f"{quoted(name)} is {_short(number)}, {number / median:.0f} times the median of "
                         f"{len(past)} approved requests ({_short(median)}).")
    return lines


def _is_path(name: str, value: Any) -> bool:
    if not isinstance(value, str) or not value or len(value) > 1000 or "://" in value or "\n" in value:
        return False
    return bool(_PATH_KEYS.search(name)) or value.startswith(("/", "./", "../", "~/"))


def _folder(path: str) -> str:
    folder = posixpath.dirname(posixpath.normpath(path.replace("\\", "/")))
    return folder or "."


def _folders(params: Mapping[str, Any], approved: Sequence[Mapping[str, Any]], min_history: int) -> list[str]:
    lines = []
    for name, value in params.items():
        if not _is_path(name, value):
            continue
        past = {_folder(p[name]) for p in approved if _is_path(name, p.get(name))}
        count = sum(1 for p in approved if _is_path(name, p.get(name)))
        if count < min_history:
            continue
        folder = _folder(value)
        if any(folder == f or folder.startswith(f.rstrip("/") + "/") for f in past if f != "."):
            continue
        if folder == "." and "." in past:
            continue
        usual = ", ".join(quoted(f) for f in sorted(past)[:3]) + (" and others" if len(past) > 3 else "")
        lines.append(f"{quoted(name)} is {quoted(value)}, outside the folders approved before ({usual}).")
    return lines


def _short(number: float) -> str:
    return f"{number:,.0f}" if abs(number) >= 100 or number == int(number) else f"{number:,.2f}"
