"""``python -m baselines.marft``: MARFT: one LoRA adapter per agent on one base model, a centralized
critic, sequential advantages."""

from .cli import method_main

main = method_main("marft")

if __name__ == "__main__":
    raise SystemExit(main())
