"""Tables of the similar-requests cards (migration 0019_similar_cards owns them; these mirror them on the
shared metadata)."""

from __future__ import annotations

import sqlalchemy as sa

from storage.schema import Json, UTCDateTime, metadata

# One digest card of alike pending requests in a channel (bot/approvals/similar.py).
similar_cards = sa.Table(
    "similar_cards",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # deterministic in its group: replicas make it once
    sa.Column("channel", sa.String(40), nullable=False),
    sa.Column("tool", sa.String(200), nullable=False),
    sa.Column("shape", Json, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("ts", sa.String(40)),  # the posted message's ts (None until posted)
    sa.Column("state", sa.String(64), nullable=False),  # the members' state its last enqueued update shows
    sa.Column("closed_at", UTCDateTime),  # nothing left pending: its final tally is enqueued
    sa.Index("ix_similar_cards_open", "closed_at"),
)

# Which card a request is on: at most one, ever (the primary key), so no request is on two cards.
similar_members = sa.Table(
    "similar_members",
    metadata,
    sa.Column("request_id", sa.String(40), primary_key=True),
    sa.Column("card_id", sa.String(40), nullable=False),
    sa.Column("added_at", UTCDateTime, nullable=False),
    sa.Index("ix_similar_members_card", "card_id"),
)
