"""Reminders, escalation and timeouts; the App Home inbox's per-user index.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TIMER_COLUMNS = (
    ("timing", lambda: sa.Column("timing", Json)),
    ("reminders_sent", lambda: sa.Column("reminders_sent", sa.Integer, nullable=False, server_default="0")),
    ("remind_at", lambda: sa.Column("remind_at", UTCDateTime)),
    ("escalation_loop", lambda: sa.Column("escalation_loop", sa.Integer, nullable=False, server_default="0")),
    ("escalation_level", lambda: sa.Column("escalation_level", sa.Integer, nullable=False, server_default="0")),
    ("escalate_at", lambda: sa.Column("escalate_at", UTCDateTime)),
    ("expires_at", lambda: sa.Column("expires_at", UTCDateTime)),
    ("snoozed_until", lambda: sa.Column("snoozed_until", UTCDateTime)),
    ("escalation", lambda: sa.Column("escalation", Json)),
    ("card_permalink", lambda: sa.Column("card_permalink", sa.Text)),
)


def upgrade() -> None:
    # Plain ADD COLUMN on both engines (nullable, or NOT NULL with a constant default): no table rewrite.
    for _name, column in _TIMER_COLUMNS:
        op.add_column("requests", column())
    # Due rows are found through the existing ix_requests_next_due_at (0001).
    op.create_index("ix_decisions_decided_by", "decisions", ["decided_by_id", "decided_at"])

    op.create_table(
        "request_people",
        sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
        sa.Column("user_id", sa.String(40), primary_key=True),
        sa.Column("role", sa.String(16), primary_key=True),
        sa.Column("added_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_request_people_user", "request_people", ["user_id", "role", "request_id"])

    op.create_table(
        "home_users",
        sa.Column("user_id", sa.String(40), primary_key=True),
        sa.Column("first_opened_at", UTCDateTime, nullable=False),
        sa.Column("last_opened_at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("home_users")
    op.drop_index("ix_request_people_user", table_name="request_people")
    op.drop_table("request_people")
    op.drop_index("ix_decisions_decided_by", table_name="decisions")
    with op.batch_alter_table("requests") as batch:
        for name, _column in reversed(_TIMER_COLUMNS):
            batch.drop_column(name)
