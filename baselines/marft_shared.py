"""``python -m baselines.marft_shared``: MARFT-shared: one LoRA adapter shared by all agents, a
centralized critic, sequential advantages."""

import sys

from .cli import train_main

DESCRIPTION = (
    "MARFT-shared: one LoRA adapter shared by all agents, a centralized critic, sequential "
    "advantages."
)


def main(argv=None) -> int:
    return train_main("marft_shared", DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(main())
