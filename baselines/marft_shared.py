"""``python -m baselines.marft_shared``: MARFT-shared: one LoRA adapter shared by all agents, a
centralized critic, sequential advantages."""

from .cli import method_main

main = method_main("marft_shared")

if __name__ == "__main__":
    raise SystemExit(main())
