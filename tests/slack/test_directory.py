"""bot/slack/directory.py against the fake Slack Web API through the real slack_sdk client: one lookup
per group at a time whoever asks, not cancelled by a caller that stops waiting, and a failure
remembered for a moment so a burst of clicks asks Slack once while it is down."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.sandbox import SlackEmulator
from bot.slack.directory import SlackDirectory
from tests.support.waits import until

LOOKUP = "usergroups.users.list"


@pytest_asyncio.fixture
async def directory(slack: SlackEmulator) -> AsyncIterator[SlackDirectory]:
    slack.add_usergroup("SOPS", ["U1", "U2"])
    found = SlackDirectory(AsyncWebClient(token="xoxb-test", base_url=slack.url))
    try:
        yield found
    finally:
        await found.close()


def lookups(slack: SlackEmulator) -> int:
    return len(slack.calls_to(LOOKUP, ok_only=False))


async def test_a_caller_that_stops_waiting_does_not_cancel_the_lookup_for_the_others(
        directory: SlackDirectory, slack: SlackEmulator) -> None:
    slack.hang(LOOKUP, apply=True)
    first = asyncio.create_task(directory.group_members("SOPS"))
    await slack.wait_for(LOOKUP, ok_only=False)
    second = asyncio.create_task(directory.group_members("SOPS"))
    with pytest.raises(asyncio.TimeoutError):  # the first caller's bound (e.g. before an ack) runs out
        await asyncio.wait_for(first, 0.01)
    slack.release_hung()
    assert await second == frozenset({"U1", "U2"})
    assert await directory.group_members("SOPS") == frozenset({"U1", "U2"})  # cached: no second call
    assert lookups(slack) == 1


async def test_a_failed_lookup_is_remembered_for_a_moment(directory: SlackDirectory, slack: SlackEmulator) -> None:
    slack.error(LOOKUP, "fatal_error", times=1)
    for _ in range(3):  # a burst of clicks while Slack fails: one call
        with pytest.raises(SlackApiError):
            await directory.group_members("SOPS")
    assert lookups(slack) == 1
    directory._failed.clear()  # the moment has passed (FAILURE_SECONDS)
    assert await directory.group_members("SOPS") == frozenset({"U1", "U2"})
    assert lookups(slack) == 2


async def test_an_unknown_group_is_a_lookup_error(directory: SlackDirectory) -> None:
    with pytest.raises(LookupError):
        await directory.group_members("SNONE")


async def test_close_stops_a_lookup_nobody_waits_for(directory: SlackDirectory, slack: SlackEmulator) -> None:
    slack.hang(LOOKUP)
    waiting = asyncio.create_task(directory.group_members("SOPS"))
    await slack.wait_for(LOOKUP, ok_only=False)
    waiting.cancel()
    await directory.close()
    assert directory._inflight == {}
    slack.release_hung()


async def test_a_remembered_failure_does_not_grow_with_every_raise(directory: SlackDirectory,
                                                                   slack: SlackEmulator) -> None:
    """Each raise of the remembered error would pile its frames onto the one traceback: a burst of clicks
    while Slack is down then cost more with every click (and kept their frames alive)."""
    import traceback
    slack.error(LOOKUP, "fatal_error", times=1)
    depths = []
    for _ in range(5):
        try:
            await directory.group_members("SOPS")
        except SlackApiError as exc:
            depths.append(len(traceback.extract_tb(exc.__traceback__)))
    assert len(depths) == 5 and depths[1:] == [depths[1]] * 4


async def test_a_lookup_nobody_waits_for_any_more_fails_quietly(directory: SlackDirectory,
                                                                  slack: SlackEmulator) -> None:
    """Every caller stopped waiting (a bound before an ack), then Slack answered with an error: the
    error is the directory's (remembered), not an unretrieved task exception for the loop to report."""
    import gc
    loop = asyncio.get_running_loop()
    reported: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        slack.hang(LOOKUP)  # released without effect: {"ok": false, "error": "fake_released"}
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(directory.group_members("SOPS"), 0.05)
        slack.release_hung()
        await until(lambda: not directory._inflight, "the released lookup to end")
        assert directory._inflight == {} and "SOPS" in directory._failed
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert reported == []
