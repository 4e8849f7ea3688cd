"""Core tables: requests, decisions, audit events, outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("action_name", sa.String(200), nullable=False),
        sa.Column("params", Json, nullable=False),
        sa.Column("params_schema", Json),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("context", sa.Text),
        sa.Column("preview", Json),
        sa.Column("risk", sa.String(16), nullable=False),
        sa.Column("channel", sa.String(40), nullable=False),
        sa.Column("approvers", Json, nullable=False),
        sa.Column("callback_url", sa.Text),
        sa.Column("requested_by", sa.String(200)),
        sa.Column("card_channel", sa.String(40)),
        sa.Column("card_ts", sa.String(40)),
        sa.Column("thread_ts", sa.String(40)),
        sa.Column("idempotency_key", sa.String(255)),
        sa.Column("body_hash", sa.String(64)),
        sa.Column("extra", Json, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("next_due_at", UTCDateTime),
    )
    op.create_index("ix_requests_status_created", "requests", ["status", "created_at", "id"])
    op.create_index("ux_requests_idempotency_key", "requests", ["idempotency_key"], unique=True)
    op.create_index("ix_requests_next_due_at", "requests", ["next_due_at"])

    op.create_table(
        "decisions",
        sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("params", Json, nullable=False),
        sa.Column("changes", Json, nullable=False),
        sa.Column("comment", sa.Text),
        sa.Column("decided_by_id", sa.String(40)),
        sa.Column("decided_by_name", sa.String(200)),
        sa.Column("decided_at", UTCDateTime, nullable=False),
        sa.Column("via", sa.String(16), nullable=False),
    )

    op.create_table(
        "audit_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.Column("data", Json, nullable=False),
        sa.Column("at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_audit_events_request", "audit_events", ["request_id", "id"])

    op.create_table(
        "outbox",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(40)),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("dedupe_key", sa.String(255), nullable=False),
        sa.Column("payload", Json, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=False),
        sa.Column("lease_until", UTCDateTime),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("done_at", UTCDateTime),
    )
    op.create_index("ux_outbox_dedupe_key", "outbox", ["dedupe_key"], unique=True)
    op.create_index("ix_outbox_due", "outbox", ["status", "next_attempt_at"])


def downgrade() -> None:
    op.drop_table("outbox")
    op.drop_table("audit_events")
    op.drop_table("decisions")
    op.drop_table("requests")
