"""Misspelt SIGNOFF_* settings are named with a suggestion; the list of known ones is complete."""

from __future__ import annotations

import re
from pathlib import Path

from bot.process.settings import KNOWN_SETTINGS, Settings, unknown_settings

ROOT = Path(__file__).resolve().parents[2]
BASE = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}


def test_a_misspelt_setting_in_the_environment_gets_a_suggestion() -> None:
    settings = Settings.from_env({**BASE, "SIGNOFF_TIMOUT": "4h", "SIGNOFF_API_TOKEN": "x" * 10}, dotenv=None)
    assert settings.unknown_settings_lines() == [
        "SIGNOFF_API_TOKEN is not a Signoff setting: did you mean SIGNOFF_API_TOKENS?",
        "SIGNOFF_TIMOUT is not a Signoff setting: did you mean SIGNOFF_TIMEOUT?",
    ]


def test_a_misspelt_setting_in_dotenv_too(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("SIGNOFF_REMIND_EVRY=10m\nSIGNOFF_FOO=1\n")
    settings = Settings.from_env(BASE, dotenv=dotenv)
    assert settings.unknown_settings_lines() == [
        "SIGNOFF_FOO is not a Signoff setting: Signoff does not read it (see the README's settings)",
        "SIGNOFF_REMIND_EVRY is not a Signoff setting: did you mean SIGNOFF_REMIND_EVERY?",
    ]


def test_known_settings_are_quiet() -> None:
    assert unknown_settings({name: "1" for name in KNOWN_SETTINGS}) == []


def test_every_setting_the_code_reads_is_known() -> None:
    """A new SIGNOFF_* setting must be added to KNOWN_SETTINGS, or setting it would draw a warning."""
    named = set()
    for folder in ("bot", "storage", "client/signoff"):
        for path in (ROOT / folder).rglob("*.py") if (ROOT / folder).is_dir() else ():
            named |= set(re.findall(r"\bSIGNOFF_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    prefixes = {n for n in named if any(k.startswith(n + "_") for k in KNOWN_SETTINGS)}  # "SIGNOFF_REMIND_*"
    assert named - prefixes - KNOWN_SETTINGS == set()
