"""``python -m baselines.ippo``: IPPO: one LoRA adapter and one critic per agent; each critic sees
only its agent's observation."""

from .cli import method_main

main = method_main("ippo")

if __name__ == "__main__":
    raise SystemExit(main())
