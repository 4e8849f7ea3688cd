"""storage.group_commit: items that arrive while a group is being written share the next group; each
caller returns once its own group committed; a failing group is written again one by one, so only
the failing item's caller sees its error; no caller waits forever if the writer is cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from storage.group_commit import GroupCommit


class Writer:
    """Records every group it was asked to write and every group that 'committed'."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.calls: list[list[str]] = []
        self.committed: list[list[str]] = []
        self.refuse = refuse
        self.hold: asyncio.Event | None = None
        self.entered = asyncio.Event()

    async def __call__(self, group: Sequence[str]) -> None:
        self.calls.append(list(group))
        self.entered.set()
        if self.hold is not None:
            await self.hold.wait()
        bad = [item for item in group if item in self.refuse]
        if bad:
            raise ValueError(f"refused {bad[0]}")  # the whole unit rolls back
        self.committed.append(list(group))


async def test_items_waiting_during_a_write_share_the_next_group() -> None:
    writer = Writer()
    writer.hold = asyncio.Event()
    commit: GroupCommit[str] = GroupCommit(writer)
    first = asyncio.create_task(commit.submit("a"))
    await writer.entered.wait()  # "a" is being written, alone
    later = [asyncio.create_task(commit.submit(x)) for x in "bcd"]
    await asyncio.sleep(0)  # let them queue (no time passes: the writer is held by the event)
    assert not first.done() and not any(t.done() for t in later)  # nobody returns before its commit
    writer.hold.set()
    await asyncio.gather(first, *later)
    assert writer.committed == [["a"], ["b", "c", "d"]]


async def test_a_failing_group_is_written_again_one_by_one() -> None:
    writer = Writer(refuse=frozenset({"bad"}))
    commit: GroupCommit[str] = GroupCommit(writer)
    results = await asyncio.gather(*(commit.submit(x) for x in ("x", "bad", "y")), return_exceptions=True)
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError) and "bad" in str(results[1])
    assert writer.calls[0] == ["x", "bad", "y"]  # the group, rolled back
    assert writer.committed == [["x"], ["y"]]  # each good item committed once, on its own


async def test_limit_splits_groups() -> None:
    writer = Writer()
    commit: GroupCommit[str] = GroupCommit(writer, limit=2)
    await asyncio.gather(*(commit.submit(x) for x in "abcde"))
    assert writer.committed == [["a", "b"], ["c", "d"], ["e"]]


async def test_a_cancelled_writer_leaves_no_caller_waiting() -> None:
    writer = Writer()
    writer.hold = asyncio.Event()
    commit: GroupCommit[str] = GroupCommit(writer)
    waiting = [asyncio.create_task(commit.submit(x)) for x in "ab"]
    await writer.entered.wait()
    queued = asyncio.create_task(commit.submit("c"))
    await asyncio.sleep(0)
    assert commit._task is not None
    commit._task.cancel()  # the server shutting down mid-write
    for task in (*waiting, queued):
        with pytest.raises(RuntimeError):
            await task
    assert writer.committed == []
    writer.hold = None
    await commit.submit("d")  # and it starts again for the next item
    assert writer.committed == [["d"]]
