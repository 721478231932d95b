"""Critics: a LoRA adapter on the shared base plus a scalar value head.

- Centralized (MARFT, MARFT-shared): one critic, input = the role-conditioned context, i.e. the
  environment's ``state()`` transcript before the action (the problem, earlier rounds, this
  round's predecessors' actions) followed by which agent acts next.
- Per-agent (IPPO): one critic per agent whose input is only that agent's own observation (the
  exact prompt its policy saw).

Values are read from the last hidden state at the positions that predict each action token:
position ``len(prompt) - 1`` gives the action-level value ``V(context)``, and with the action
appended the later positions give token-level values ``V(context, a_<t)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .models import AdapterModel, PackedBatch, gather_hidden

CENTRALIZED = "centralized"
OWN_OBSERVATION = "own_observation"


class ValueHead(nn.Module):
    """``hidden -> scalar`` in float32, initialised to output 0 (no bias toward any return)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.float()).squeeze(-1)


def centralized_messages(state: str, agent: str, role: str) -> list[dict]:
    """The centralized critic's input for the turn of ``agent``: the global state,
    role-conditioned."""
    return [{"role": "user", "content": f"{state}\n\nNext to act: {agent} ({role})."}]


class Critics:
    """Named critics sharing one :class:`AdapterModel`: adapter ``name`` + value head ``name``."""

    def __init__(self, model: AdapterModel, names: Sequence[str], kind: str | None):
        if kind is None and names:
            raise ValueError(f"critics {list(names)} need a kind; None is for no critics")
        if kind is not None and kind not in (CENTRALIZED, OWN_OBSERVATION):
            raise ValueError(
                f"unknown critic kind {kind!r}; valid: {CENTRALIZED!r}, {OWN_OBSERVATION!r}"
            )
        missing = [n for n in names if n not in model.adapters]
        if missing:
            raise ValueError(
                f"critic adapters {missing} are not on the model (have {model.adapters})"
            )
        self.model = model
        self.kind = kind
        self.names = list(names)
        self.heads = nn.ModuleDict({n: ValueHead(model.hidden_size) for n in self.names})
        self.heads.to(model.device)

    def parameters(self, name: str) -> list[nn.Parameter]:
        """Trainable parameters of critic ``name``: its LoRA adapter and its value head."""
        return self.model.parameters(name) + list(self.heads[name].parameters())

    def values(self, name: str, batch: PackedBatch) -> torch.Tensor:
        """Values ``[B, A]`` of critic ``name`` at each action-token position of ``batch``.

        Column 0 is always ``V(context)``, even for rows whose action is empty.
        """
        with self.model.using(name):
            hidden = self.model.hidden_states(batch.input_ids, batch.attention_mask)
        return self.heads[name](gather_hidden(hidden, batch.positions))

    def head_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.heads.state_dict().items()}

    def load_head_state(self, state: dict[str, torch.Tensor]) -> None:
        self.heads.load_state_dict(state)
