"""MARFT, MARFT-shared and IPPO baselines on one trainer core.

Trains teams of LLM agents on any registered Flex-MG environment of ``marft_envs``
through its public API only. ``baselines.core`` holds the model-free parts (advantage
and loss functions, typed configs, checkpoints, metrics logging); see
``docs/baselines_algorithms.md``.
"""
