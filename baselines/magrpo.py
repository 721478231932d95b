"""``python -m baselines.magrpo``: MAGRPO: no critic; K joint episodes per problem,
group-relative advantages on the team reward; one LoRA adapter per agent."""

import sys

from .cli import train_main

DESCRIPTION = (
    "MAGRPO: no critic; K joint episodes per problem, group-relative advantages on the team "
    "reward; one LoRA adapter per agent (algo.method=magrpo_shared: one shared adapter)."
)


def main(argv=None) -> int:
    return train_main("magrpo", DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(main())
