"""Prometheus metrics. One registry per app instance, so tests can run several apps in one process."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

ACK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0, 5.0)
# How long people take: 5 s to 3 days.
DECIDE_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0,
                  259200.0)
OTHER = "other"


class Bounded:
    """A label's values, at most `limit` distinct ones; every later one is "other". Channel ids and tool
    names come from agents: unbounded, each new one would be a new time series in every scrape."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(value)
        return value


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, *, max_channels: int = 50, max_tools: int = 50) -> None:
        self.registry = CollectorRegistry()
        # Time to decide (bot/domain/stats.py has the definitions), labels bounded (SIGNOFF_METRICS_MAX_*).
        self.channel_label, self.tool_label = Bounded(max_channels), Bounded(max_tools)
        self.time_to_first_view = Histogram(
            "signoff_time_to_first_view_seconds", "From a request's creation to the first time a person opened it "
            "(App Home, a form, or deciding it)", ["tier", "channel", "tool"], buckets=DECIDE_BUCKETS,
            registry=self.registry)
        self.time_to_decision = Histogram(
            "signoff_time_to_decision_seconds", "From a request's creation to a person's decision",
            ["tier", "channel", "tool"], buckets=DECIDE_BUCKETS, registry=self.registry)
        self.request_outcomes = Counter(
            "signoff_request_outcomes", "Requests expired, escalated, edited, rejected or undone, by tier",
            ["outcome", "tier"], registry=self.registry)
        self.requests_created = Counter(
            "signoff_requests_created", "Approval requests created", ["kind", "risk"], registry=self.registry
        )
        self.decisions = Counter(
            "signoff_decisions", "Decisions recorded, by outcome and how", ["outcome", "via"], registry=self.registry
        )
        self.ack_latency = Histogram(
            "signoff_slack_ack_seconds",
            "Time from receiving a Slack request to answering it",
            ["type"],
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.slack_api_errors = Counter(
            "signoff_slack_api_errors",
            "Slack Web API calls that failed, by method and HTTP status or Slack error",
            ["method", "status"],
            registry=self.registry,
        )
        self.outbox_deliveries = Counter(
            "signoff_outbox_deliveries", "Outbox items finished, by kind and result", ["kind", "result"],
            registry=self.registry,
        )
        self.webhook_failures = Counter(
            "signoff_webhook_failures", "Webhook deliveries that gave up", registry=self.registry
        )
        self.click_backlog = Gauge(
            "signoff_slack_click_backlog", "Acked Slack clicks whose work waits for a burst of clicks to pause",
            registry=self.registry,
        )

        # Observable progress, so tests (and operators) wait for a state instead of sleeping for it.
        self.sweeps = Counter("signoff_sweeps", "Background sweeps finished, by kind (outbox, timers)", ["kind"],
                              registry=self.registry)
        self.long_polls = Gauge("signoff_long_polls", "Long-polls (?wait=) being held now", registry=self.registry)
        # The SQLite cross-process watcher's cost (bot/approvals/foreign_changes.py): it must not grow with the waiters.
        self.watch_looks = Counter("signoff_longpoll_watch_looks", "Looks of the SQLite watcher at data_version",
                                   registry=self.registry)
        self.watch_changes = Counter("signoff_longpoll_watch_changes",
                                     "Looks of the SQLite watcher that read the audit rows (another "
                                     "process committed, or someone waits again after nobody did)",
                                     registry=self.registry)
        self.watch_queries = Counter("signoff_longpoll_watch_queries", "Statements the SQLite watcher ran",
                                     registry=self.registry)
        self.longpoll_notifications = Counter(
            "signoff_longpoll_notifications", "PostgreSQL notifications of a changed request this process's "
            "listener heard (every process's, its own included)", registry=self.registry)
        self.longpoll_rereads = Counter(
            "signoff_longpoll_rereads", "Reads of its request by a woken long-poll: a wake-up that did not hand it "
            "the decided request (a reminder, another process's decision)", registry=self.registry)

        # AI notes and thread answers (bot/approvals/assist.py): what they cost and how they ended.
        self.ai_calls = Counter("signoff_ai_calls", "Model calls for AI notes and thread answers, by use and result "
                                "(added, answered, timeout, error, empty)", ["use", "result"], registry=self.registry)
        self.ai_tokens = Counter("signoff_ai_tokens", "Tokens of AI notes and thread answers, by use and direction "
                                 "(input, output)", ["use", "direction"], registry=self.registry)

        # A leak shows as growth under steady load (bench/soak.py samples it once a minute).
        self.asyncio_tasks = Gauge("signoff_asyncio_tasks", "asyncio tasks alive in this process's event loop",
                                   registry=self.registry)
        self.asyncio_tasks.set_function(_tasks_alive)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _tasks_alive() -> float:
    try:
        return float(len(asyncio.all_tasks()))
    except RuntimeError:  # rendered outside the event loop (a test's registry): none of its tasks to count
        return 0.0
