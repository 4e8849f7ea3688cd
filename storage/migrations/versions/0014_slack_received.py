"""What Slack sent, stored before Signoff acks it: `slack_received`.

Listeners acked first and wrote afterwards, so a process killed in a burst of clicks lost clicks
the people had seen taken (Slack never resends an interactive payload). Every click, form answer,
command and event is now one row here, written (group-committed) before the ack, marked done once
handled, and replayed by any process once its lease runs out (bot/slack/received.py).

Revision ID: 0014_slack_received
Revises: 0010_resume_claims
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import UTCDateTime

revision = "0014_slack_received"
down_revision = "0012_undo_and_stats"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slack_received",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(200), nullable=False, unique=True),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("content_type", sa.String(80), nullable=False),
        sa.Column("received_at", UTCDateTime, nullable=False),
        sa.Column("lease_until", UTCDateTime, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("done_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_slack_received_open", "slack_received", ["done_at", "lease_until"])


def downgrade() -> None:
    op.drop_index("ix_slack_received_open", table_name="slack_received")
    op.drop_table("slack_received")
