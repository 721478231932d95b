"""``python -m baselines.marft``: MARFT: one LoRA adapter per agent on one base model, a centralized
critic, sequential advantages."""

import sys

from .cli import train_main

DESCRIPTION = (
    "MARFT: one LoRA adapter per agent on one base model, a centralized critic, sequential "
    "advantages."
)


def main(argv=None) -> int:
    return train_main("marft", DESCRIPTION, argv)


if __name__ == "__main__":
    sys.exit(main())
