"""Durable agent runs: runs, their append-only message log, tool executions,
queued thread interventions, and processed Slack event ids.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "runs",
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
        sa.Column("lease_owner", sa.String(64)),
        sa.Column("lease_until", UTCDateTime),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_runs_status_lease", "runs", ["status", "lease_until"])
    op.create_index("ix_runs_root", "runs", ["channel", "root_ts"])

    op.create_table(
        "run_messages",
        sa.Column("run_id", sa.String(40), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )

    op.create_table(
        "tool_executions",
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
    )
    op.create_index("ix_tool_executions_turn", "tool_executions", ["run_id", "turn_seq", "position"])
    op.create_index("ix_tool_executions_request", "tool_executions", ["request_id"])

    op.create_table(
        "run_interventions",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(40), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("user_id", sa.String(40), nullable=False),
        sa.Column("user_name", sa.String(200)),
        sa.Column("slack_ts", sa.String(40)),
        sa.Column("consumed_seq", sa.Integer),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_run_interventions_queue", "run_interventions", ["run_id", "consumed_seq", "id"])

    op.create_table(
        "slack_events",
        sa.Column("event_id", sa.String(100), primary_key=True),
        sa.Column("received_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slack_events")
    op.drop_table("run_interventions")
    op.drop_table("tool_executions")
    op.drop_table("run_messages")
    op.drop_table("runs")
