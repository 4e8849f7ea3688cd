"""The local Slack sandbox: an emulator of the Slack Web API (``SlackEmulator``), signed requests as
Slack sends them (``signed.SlackClient``), a scripted Messages API (``model``), and the page of
``signoff demo``. The test suite and the benchmarks use the same emulator.
"""

from __future__ import annotations

from bot.sandbox.server import SlackEmulator
from bot.sandbox.state import Call, Message, MessageVersion

__all__ = ["Call", "Message", "MessageVersion", "SlackEmulator"]
