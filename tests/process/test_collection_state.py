"""`signoff` turns the garbage collector off while it starts (bot/__main__.py): every way out of `main`
turns it back on, so a process that calls `main` and goes on (a test, an embedding host) keeps it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from bot.__main__ import main


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env of the repository's
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["serve"],  # no Slack credentials: refused before it binds
    ["serve", "--check"],
    ["policy", "check", "missing.yaml"],
    ["run", "tidy up"],  # no database named
])
def test_collection_is_on_again_after_a_refused_command(bare_env: Path, argv: list[str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert gc.isenabled()
    assert main(argv) != 0
    assert gc.isenabled()
    assert capsys.readouterr().err.strip()  # it said why


def test_collection_is_on_again_after_bad_arguments(bare_env: Path) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--no-such-option"])
    assert gc.isenabled()


async def test_a_serving_process_collects_fully_and_a_stream_of_slack_requests_only_delays_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`signoff serve` runs a full collection every `every` seconds (bot/process/serve.py): without it, cycles
    promoted out of gen 0 waited hours under its GC tuning. A Slack request in the last `quiet` seconds puts it
    off, for at most another `every`: requests that never stop do not stop it."""
    import asyncio
    import time

    from bot.process import serve

    collected: list[int] = []
    both = asyncio.Event()

    def collect(generation: int = 2) -> int:
        collected.append(generation)
        if len(collected) >= 2:
            both.set()
        return 0

    monkeypatch.setattr(serve.gc, "collect", collect)
    for last_arrival in (lambda: -float("inf"), time.monotonic):  # nobody asking; Slack asking all the time
        collected.clear()
        both.clear()
        task = asyncio.create_task(serve._full_collections(last_arrival, every=0.01, quiet=0.5))
        try:
            await asyncio.wait_for(both.wait(), 30)
        finally:
            task.cancel()
        assert collected[:2] == [2, 2]  # full collections, again and again
