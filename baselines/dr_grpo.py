"""``python -m baselines.dr_grpo``: Dr. GRPO's unbiased loss (Liu et al., 2025, "Understanding
R1-Zero-Like Training") on MAGRPO's K joint episodes per problem: advantages are the team
reward minus the group's mean, not divided by its std (``algo.scale_by_std=false``), and the
policy loss sums each response's tokens over a constant (``algo.loss_agg=seq_sum_norm``:
``model.max_new_tokens``), so neither the length of a response nor the spread of its group
weighs its gradient. One LoRA adapter per agent. The same on AT-GRPO's trees:
``python -m baselines.at_grpo algo.scale_by_std=false algo.loss_agg=seq_sum_norm``."""

from .cli import method_main

main = method_main("dr_grpo")

if __name__ == "__main__":
    raise SystemExit(main())
