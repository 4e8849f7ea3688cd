"""Assembles the agent runner into one Signoff process (called from `bot.process.app.build`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.access import RunAccess
from bot.agent import slack as agent_slack
from bot.agent import slack_outbox
from bot.agent.demo_tools import demo_toolset
from bot.agent.questions import ask_human_tool
from bot.agent.runner import Runner
from bot.agent.run_service import RunService
from bot.agent.messages import import_sdk
from bot.agent.step_values import Agent, StepConfig
from bot.agent.steps import Steps
from bot.process.clock import Clock
from bot.domain.model import Risk
from bot.outbox.egress import EgressPolicy
from bot.process.metrics import Metrics
from bot.approvals.service import Service
from bot.process.settings import Settings
from bot.slack.delivery import SlackCall
from storage.run_store import SqlRunStore
from storage.sql import SqlStore

if TYPE_CHECKING:
    import anthropic

DEFAULT_AGENT = "demo"

DEMO_SYSTEM = """You are an agent run by Signoff for a team that supervises you in Slack.
You can read and write files in a workspace folder, send email, fetch web pages and call webhooks.
Risky tool calls are shown to a person first: they may approve, edit the parameters, or reject with a reason.
When a tool result says a person changed the parameters, the call ran with their values: take that into account.
When a call was rejected, do not try the same thing again unchanged; follow the reason or ask.
If the task is ambiguous, use ask_human instead of guessing. Messages from people in the run's thread
arrive as user messages; follow them. When you are done, answer with a short summary of what you did."""


def demo_agent(fetch_risk: Risk = Risk.HIGH) -> Agent:
    tools = demo_toolset(fetch_risk=fetch_risk)
    tools.add(ask_human_tool)
    return Agent(DEFAULT_AGENT, DEMO_SYSTEM, tools)


@dataclass
class AgentRuntime:
    runs: SqlRunStore
    run_service: RunService
    runner: Runner
    steps: Steps
    interactions: agent_slack.RunInteractions
    delivery: slack_outbox.RunDelivery
    settings: Settings
    _client: anthropic.AsyncAnthropic | None = field(default=None, repr=False)

    def client(self) -> anthropic.AsyncAnthropic:
        """One Anthropic client per process, made on first use (the server starts without a key)."""
        if self._client is None:
            self._client = import_sdk().AsyncAnthropic(
                api_key=self.settings.anthropic_api_key,
                base_url=self.settings.anthropic_base_url,
                max_retries=self.settings.anthropic_max_retries,
            )
        return self._client

    def register(self, bolt: AsyncApp) -> None:
        agent_slack.register(bolt, self.interactions)

    async def ended_runs(self, ids: list[str]) -> list[str]:
        """Those of `ids` that are runs which have ended (the SQLite cross-process check)."""
        return await self.runner.runs.ended([i for i in ids if i.startswith("run_")])

    async def start(self) -> None:
        await self.runner.start()

    async def stop(self) -> None:
        await self.runner.stop()
        if self._client is not None:
            await self._client.close()


def build_agent(
    settings: Settings, *, service: Service, store: SqlStore, call: SlackCall, client: AsyncWebClient, clock: Clock,
    metrics: Metrics, agents: dict[str, Agent] | None = None,
) -> AgentRuntime:
    """The runner's parts. The caller wires its outbox handlers (`delivery.handlers()`), routes and
    card renderer (`slack_outbox.render_any`) with everything else (bot/process/app.py)."""
    agents = agents or {DEFAULT_AGENT: demo_agent(Risk(settings.fetch_url_risk))}
    runs = SqlRunStore(store)
    holder: dict[str, AgentRuntime] = {}
    access = RunAccess(settings.run_starters, settings.run_approvers, settings.run_writers,
                       settings.run_self_approval)
    config = StepConfig(
        model=settings.anthropic_model,
        max_tokens=settings.anthropic_max_tokens,
        lease_seconds=settings.run_lease_seconds,
        max_steps=settings.run_max_steps,
        workspace=Path(settings.agent_workspace),
        email_outbox=Path(settings.email_outbox),
        http_timeout=max(settings.http_timeout_seconds, 30.0),
        api_key_set=bool(settings.anthropic_api_key),
        egress=EgressPolicy.from_entries(settings.egress_allow),
        access=access,
    )
    steps = Steps(service, runs, agents, config, clock=clock, client=lambda: holder["runtime"].client())
    runner = Runner(steps, runs, service, clock=clock, lease_seconds=settings.run_lease_seconds,
                    sweep_seconds=settings.run_sweep_seconds)
    run_service = RunService(service, runs, clock=clock, agents=set(agents), kick=runner.kick,
                             max_steps=settings.run_max_steps)
    run_service.access = access
    delivery = slack_outbox.RunDelivery(run_service, call)
    interactions = agent_slack.RunInteractions(service, run_service, client, clock, metrics,
                                               default_agent=DEFAULT_AGENT, access=access)
    if not settings.anthropic_api_key:
        interactions.unavailable = ("Agent runs are off on this Signoff server: ANTHROPIC_API_KEY is not set. "
                                    "Ask whoever runs it to set the key and restart it. Nothing was started.")
    runtime = AgentRuntime(runs, run_service, runner, steps, interactions, delivery, settings)
    holder["runtime"] = runtime
    return runtime
