"""A bounded table of statements built per shape (`Shapes`): the SQL text of a multi-row write depends
on how many rows of each kind it carries, so a long-running process meets new shapes for hours. Kept
without a bound, each one stayed for the process's life (and, prepared, on every pooled connection); the
least recently used now go once `size` are kept, and are built again if they come back."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Shapes(Generic[K, V]):
    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, build: Callable[[], V]) -> V:
        found = self._kept.get(key)
        if found is None:
            found = self._kept[key] = build()
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(key)
        return found

    def __len__(self) -> int:
        return len(self._kept)
