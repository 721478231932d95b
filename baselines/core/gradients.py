"""Reading the gradients a training step applies, for checks that compare two code paths
(gradient checkpointing on and off: ``tests/baselines/test_gpu_paths.py``,
``benchmarks/bench_trainer_paths.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import nn

__all__ = ["randomise_value_heads", "record_step_gradients"]


@torch.no_grad()
def randomise_value_heads(heads: Iterable[nn.Module], seed: int, scale: float = 0.5) -> None:
    """Overwrite value heads with seeded normal weights: a head starts at zero, which gives its
    critic's adapter no gradient at all, so nothing would be compared."""
    init = torch.Generator().manual_seed(seed)
    for head in heads:
        for p in head.parameters():
            p.copy_(torch.randn(p.shape, generator=init) * scale)


def record_step_gradients(
    optimizers: Mapping[str, torch.optim.Optimizer],
) -> dict[str, list[torch.Tensor]]:
    """Hooks every parameter of every optimiser; the returned dict fills, per optimiser name,
    with each gradient as it finishes accumulating (what the optimiser steps with, before
    clipping). Flatten one entry with ``torch.cat([g.flatten() for g in grads[name]])``."""
    grads: dict[str, list[torch.Tensor]] = {}
    for key, opt in optimizers.items():
        for p in (p for g in opt.param_groups for p in g["params"]):
            p.register_post_accumulate_grad_hook(
                lambda p, key=key: grads.setdefault(key, []).append(p.grad.detach().clone())
            )
    return grads
