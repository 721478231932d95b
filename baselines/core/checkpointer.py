"""The checkpointer: what a run's checkpoint holds, written and restored through
:mod:`baselines.core.checkpoint` (atomic folders, the newest ``keep_last`` kept).

A checkpoint holds the learner's state (every adapter, value head, optimiser and scheduler),
the RNG states, the iteration and the data position, the metric history, the config and the
versioned environment id trained on, plus peft-format adapters for reuse, so ``--resume``
continues bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint
from .config import ConfigError
from .learner import Learner

__all__ = ["Checkpointer", "RunPosition", "read_checkpoint"]


@dataclass
class RunPosition:
    """Where a run stands besides its learner: the metric history and what it trains on."""

    env_id: str  # the versioned id trained on
    config: dict[str, Any]
    next_seed: int  # the data seed of the next iteration
    history: list[dict[str, Any]] = field(default_factory=list)


def read_checkpoint(path: str | Path, env_id: str) -> dict[str, Any]:
    """The entries of a checkpoint (a ``step_*`` folder or a run directory) of a run on
    ``env_id``; :class:`ConfigError` when it was trained on another environment version."""
    state = load_checkpoint(path)
    trained_on = state.get("env_id", env_id)  # older checkpoints do not say
    if trained_on != env_id:
        raise ConfigError(
            f"checkpoint {state['path']} was trained on {trained_on!r} but this run builds "
            f"{env_id!r}; set env.id={trained_on} to resume on the same version"
        )
    return state


class Checkpointer:
    """Saves and restores ``learner`` and a :class:`RunPosition` under ``out_dir``."""

    def __init__(self, out_dir: str | Path, learner: Learner, keep_last: int):
        self.out_dir, self.learner, self.keep_last = Path(out_dir), learner, keep_last

    def state(self, position: RunPosition) -> dict[str, Any]:
        """The checkpoint's entries."""
        iteration = self.learner.iteration
        return {
            **self.learner.state(),
            "rng": capture_rng_state(),
            "iteration": iteration,
            "data_position": {"iteration": iteration, "next_seed": position.next_seed},
            "history": position.history,
            "config": position.config,
            "env_id": position.env_id,
        }

    def save(self, position: RunPosition) -> Path:
        """Checkpoint everything needed to resume (plus peft-format adapters for reuse)."""
        return save_checkpoint(
            self.out_dir,
            step=self.learner.iteration,
            state=self.state(position),
            writers={
                ("peft" if i == 0 else "peft_critic"): m.peft.save_pretrained
                for i, m in enumerate(self.learner.adapter_models())
            },
            keep_last=self.keep_last,
        )

    def load(self, path: str | Path, env_id: str) -> list[dict[str, Any]]:
        """Restore a checkpoint (a ``step_*`` folder or a run directory) of a run on ``env_id``
        into the learner and the RNGs; returns its metric history."""
        state = read_checkpoint(path, env_id)
        self.learner.load_state(state, source=f"checkpoint {state['path']}")
        restore_rng_state(state["rng"])
        self.learner.iteration = int(state["iteration"])
        return list(state["history"])
