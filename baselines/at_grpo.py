"""``python -m baselines.at_grpo``: AT-GRPO: no critic; K branches per (problem, turn, agent)
from one copied state, group-relative advantages; one LoRA adapter per agent."""

from .cli import method_main

main = method_main("at_grpo")

if __name__ == "__main__":
    raise SystemExit(main())
