"""``python -m baselines.ippo``: IPPO: one LoRA adapter and one critic per agent; each critic sees
only
its agent's observation."""

import sys

from .cli import train_main

DESCRIPTION = (
    "IPPO: one LoRA adapter and one critic per agent; each critic sees only its agent's "
    "observation."
)


def main(argv=None) -> int:
    return train_main("ippo", DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(main())
