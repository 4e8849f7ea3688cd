"""Grants made from Claude's permission suggestions (issue 12): `any_other_params`.

A Claude rule names one parameter (a Bash command) or none (the whole tool); the tool's other
parameters may then be anything, as in Claude Code. Existing grants keep the exact-names rule.

Revision ID: 0006_grant_suggestions
Revises: 0005_delegation
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_grant_suggestions"
down_revision = "0005_delegation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("any_other_params", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.drop_column("any_other_params")
