"""``python -m baselines.at_grpo``: AT-GRPO: no critic; K branches per (problem, turn, agent)
from one copied state, group-relative advantages; one LoRA adapter per agent."""

import sys

from .cli import train_main

DESCRIPTION = (
    "AT-GRPO: no critic; tree sampling (K branches per problem, turn and agent from one copied "
    "state), group-relative advantages; one LoRA adapter per agent (algo.method=at_grpo_shared: "
    "one shared adapter)."
)


def main(argv=None) -> int:
    return train_main("at_grpo", DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(main())
