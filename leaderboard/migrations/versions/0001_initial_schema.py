"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 14:17:30.395053
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("bundle_sha256", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.String(length=200), nullable=False),
        sa.Column("env_family", sa.String(length=200), nullable=False),
        sa.Column("env_spec", sa.JSON(), nullable=False),
        sa.Column("dataset_name", sa.String(length=200), nullable=False),
        sa.Column("dataset_split", sa.String(length=200), nullable=False),
        sa.Column("dataset_hash", sa.String(length=64), nullable=False),
        sa.Column("package_version", sa.String(length=100), nullable=False),
        sa.Column("method", sa.String(length=50), nullable=False),
        sa.Column("model", sa.String(length=500), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("seeds", sa.JSON(), nullable=False),
        sa.Column("team_size", sa.Integer(), nullable=False),
        sa.Column("n_tasks", sa.Integer(), nullable=False),
        sa.Column("n_episodes", sa.Integer(), nullable=False),
        sa.Column("verified_score", sa.Float(), nullable=False),
        sa.Column("ci_low", sa.Float(), nullable=False),
        sa.Column("ci_high", sa.Float(), nullable=False),
        sa.Column("claimed_score", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["tokens.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("bundle_sha256"),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submissions_env_family"), ["env_family"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_env_id"), ["env_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_token_id"), ["token_id"], unique=False)

    op.create_table(
        "episodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("task_id", sa.String(length=500), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("turns", sa.JSON(), nullable=False),
        sa.Column("final_output", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("claimed_score", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_episodes_submission_id"), ["submission_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_episodes_submission_id"))

    op.drop_table("episodes")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submissions_token_id"))
        batch_op.drop_index(batch_op.f("ix_submissions_env_id"))
        batch_op.drop_index(batch_op.f("ix_submissions_env_family"))

    op.drop_table("submissions")
    op.drop_table("tokens")
