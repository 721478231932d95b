"""environment overrides: the settings a bundle changed from its id's registered ones

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04 03:00:00

A bundle may override a few settings (``horizon``, ``feedback``, ``split``, ``stop_on_correct``,
``reward_to``); those change its environment's fingerprint, so its row is ranked in a group of its
own (``arith-v1 horizon=2``, docs/leaderboard.md). Rows stored before this revision get NULL,
read as no overrides (the registered settings).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env_overrides", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("env_overrides")
