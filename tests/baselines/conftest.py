"""Baselines tests run tiny models: one thread is faster than two on a busy machine."""

import torch

torch.set_num_threads(1)
