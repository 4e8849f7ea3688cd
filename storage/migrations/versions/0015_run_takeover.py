"""A failed run can be taken over from Slack (Retry, Correct and retry): `runs.step_limit`, `runs.retries`.

`step_limit`: the step at which the run stops (NULL: SIGNOFF_RUN_MAX_STEPS); a retry of a run that hit
the limit gives it that many steps more from where it stopped. `retries`: how many times a person took
the run over (it keys the failure notes in the thread, one per failure). Existing runs get NULL and 0.

Revision ID: 0015_run_takeover
Revises: 0014_slack_received
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_run_takeover"
down_revision = "0014_slack_received"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("step_limit", sa.Integer, nullable=True))
        batch.add_column(sa.Column("retries", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("retries")
        batch.drop_column("step_limit")
