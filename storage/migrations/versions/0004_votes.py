"""Quorum, separation of duties, typed confirmation, batches, parameter binding (issue 12, part b).

requests: quorum, requester_may_approve, confirm, requester_user (given at submit), votes (the
approvals counted so far) and items (a batch's actions and their per-item state).
decisions: votes, params_sha256 and items (per-item outcomes).
votes: one row per (request, voter): the unique key that makes a second vote by the same person
fail in the database, whatever the application read.

Revision ID: 0004_votes
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from storage.schema import Json, UTCDateTime

revision = "0004_votes"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.add_column(sa.Column("quorum", sa.Integer, nullable=False, server_default="1"))
        batch.add_column(sa.Column("requester_may_approve", sa.Boolean, nullable=False,
                                   server_default=sa.true()))
        batch.add_column(sa.Column("confirm", sa.Text))
        batch.add_column(sa.Column("requester_user", sa.String(40)))
        batch.add_column(sa.Column("votes", Json))
        batch.add_column(sa.Column("items", Json))
    with op.batch_alter_table("decisions") as batch:
        batch.add_column(sa.Column("votes", Json))
        batch.add_column(sa.Column("params_sha256", sa.String(64)))
        batch.add_column(sa.Column("items", Json))
    op.create_table(
        "votes",
        sa.Column("request_id", sa.String(40), sa.ForeignKey("requests.id"), primary_key=True),
        sa.Column("voter_id", sa.String(40), primary_key=True),
        sa.Column("voter_name", sa.String(200)),
        sa.Column("at", UTCDateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("votes")
    with op.batch_alter_table("decisions") as batch:
        for name in ("items", "params_sha256", "votes"):
            batch.drop_column(name)
    with op.batch_alter_table("requests") as batch:
        for name in ("items", "votes", "requester_user", "confirm", "requester_may_approve", "quorum"):
            batch.drop_column(name)
