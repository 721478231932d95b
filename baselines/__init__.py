"""MARFT, MARFT-shared and IPPO baselines on one trainer core.

Trains teams of LLM agents on any registered Flex-MG environment of ``marft_envs``
through its public API only. ``baselines.core`` holds the model-free parts (advantage
and loss functions, typed configs, checkpoints, metrics logging); see
``docs/baselines_algorithms.md``.
"""

import importlib.util

#: module -> the distribution that provides it; all come with the ``baselines`` extra
REQUIRED = {"torch": "torch", "transformers": "transformers", "peft": "peft", "yaml": "pyyaml"}


def missing_requirements() -> list[str]:
    """The distributions of :data:`REQUIRED` that are not installed."""
    return [dist for module, dist in REQUIRED.items() if importlib.util.find_spec(module) is None]


if missing := missing_requirements():  # name the extra, not the first module that failed
    raise ImportError(
        f"the baselines need the 'baselines' extra (missing: {', '.join(missing)}): "
        "pip install -e '.[baselines]' in a checkout (pip install 'marft-envs[baselines]' "
        "once published)"
    )
