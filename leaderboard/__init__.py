"""The marft-envs leaderboard: result bundles, re-grading, storage, a web page, a JSON API and a
CLI.

Importing ``leaderboard`` (or ``leaderboard.schema``) needs only pydantic; the server,
database and client modules are imported on use.
"""

from leaderboard.schema import (
    METHODS,
    SCHEMA_VERSION,
    Bundle,
    DatasetRef,
    EpisodeRecord,
    TurnRecord,
    read_bundle,
    write_bundle,
)

__all__ = [
    "METHODS",
    "SCHEMA_VERSION",
    "Bundle",
    "DatasetRef",
    "EpisodeRecord",
    "TurnRecord",
    "read_bundle",
    "write_bundle",
]
