"""Tables of agent runs (migration 0003 owns them; these mirror it on the shared metadata).

run_messages is append-only, one row per message: persisting a step inserts a few rows and
updates one, whatever the length of the history.
"""

from __future__ import annotations

import sqlalchemy as sa

from storage.schema import Json, UTCDateTime, metadata

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("phase", sa.String(16), nullable=False),
    sa.Column("task", sa.Text, nullable=False),
    sa.Column("channel", sa.String(40), nullable=False),
    sa.Column("agent", sa.String(100), nullable=False),
    sa.Column("requested_by", sa.String(200)),
    sa.Column("root_ts", sa.String(40)),
    sa.Column("step_count", sa.Integer, nullable=False),
    sa.Column("next_seq", sa.Integer, nullable=False),
    sa.Column("turn_seq", sa.Integer),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("cancelled_by", sa.String(200)),
    sa.Column("result", sa.Text),
    sa.Column("error", sa.Text),
    sa.Column("failed_steps", sa.Integer, nullable=False, server_default="0"),  # migration 0009
    sa.Column("step_limit", sa.Integer),  # migration 0015: NULL = SIGNOFF_RUN_MAX_STEPS
    sa.Column("retries", sa.Integer, nullable=False, server_default="0"),  # migration 0015
    sa.Column("lease_owner", sa.String(64)),
    sa.Column("lease_until", UTCDateTime),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Index("ix_runs_status_lease", "status", "lease_until"),
    sa.Index("ix_runs_root", "channel", "root_ts"),
)

run_messages = sa.Table(
    "run_messages",
    metadata,
    sa.Column("run_id", sa.String(40), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("content", Json, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

tool_executions = sa.Table(
    "tool_executions",
    metadata,
    sa.Column("run_id", sa.String(40), primary_key=True),
    sa.Column("tool_use_id", sa.String(128), primary_key=True),
    sa.Column("turn_seq", sa.Integer, nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("name", sa.String(128), nullable=False),
    sa.Column("input", Json, nullable=False),
    sa.Column("gate", sa.String(16), nullable=False),
    sa.Column("risk", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("request_id", sa.String(40)),
    sa.Column("final_input", Json),
    sa.Column("note", sa.Text),
    sa.Column("result", Json),
    sa.Column("is_error", sa.Boolean, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("started_at", UTCDateTime),
    sa.Column("finished_at", UTCDateTime),
    sa.Index("ix_tool_executions_turn", "run_id", "turn_seq", "position"),
    sa.Index("ix_tool_executions_request", "request_id"),
)

run_interventions = sa.Table(
    "run_interventions",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.String(40), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("user_id", sa.String(40), nullable=False),
    sa.Column("user_name", sa.String(200)),
    sa.Column("slack_ts", sa.String(40)),
    sa.Column("consumed_seq", sa.Integer),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Index("ix_run_interventions_queue", "run_id", "consumed_seq", "id"),
)

slack_events = sa.Table(
    "slack_events",
    metadata,
    sa.Column("event_id", sa.String(100), primary_key=True),
    sa.Column("received_at", UTCDateTime, nullable=False),
)
