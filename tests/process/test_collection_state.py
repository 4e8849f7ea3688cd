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
