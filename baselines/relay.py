"""Tiny models and training settings that learn the credit games (:mod:`marft_envs.credit`).

``relay-2agent`` is the two-agent chain (``credit-chain-2agent``) on four keys: only agent 0
(``sender_0``) sees the task, a one-letter key; only agent 1 (``receiver_1``), who does not see
the task, is graded, and scores 1 when its response is exactly the key. The team can only win
if the sender encodes the key in its message and the receiver decodes it, so credit must flow
through the predecessor channel. Used by the learning test, the learning-curve benchmarks and
the memory/overhead benchmarks; ``benchmarks/bench_credit.py`` runs every credit id.

With the tiny character model of :func:`relay_model` (vocabulary: the key letters and four
special tokens; other characters are dropped) and ``max_new_tokens=1``, an untrained team
answers right by chance only.
"""

from __future__ import annotations

from pathlib import Path

import marft_envs
import tasks
from marft_envs.credit import ExactVerifier, chain_workflow
from marft_envs.games import OPTIONS, REPAIR_KEYS, REVIEW
from tasks import Dataset

ENV_ID = "relay-2agent"
KEYS = "ABCD"

RELAY_WORKFLOW = chain_workflow(2)


def relay_dataset(keys: str = KEYS, split: str = "train") -> Dataset:
    """One task per key letter (the ``keys`` dataset); the receiver never sees the prompt."""
    return tasks.load("keys", split=split, keys=keys)


def register_relay(env_id: str = ENV_ID, keys: str = KEYS) -> str:
    """Register the two-agent chain on ``keys`` under ``env_id`` (idempotent); returns the id."""
    if env_id not in marft_envs.registry:
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": "keys",
                "dataset_kwargs": {"keys": keys},
                "workflow": RELAY_WORKFLOW.name,
                "verifier": ExactVerifier.name,
                "horizon": 1,
                "feedback": "none",
                "reward_to": "team",
            },
        )
    return env_id


#: The letters a tiny model must read and emit on each game id (:func:`vocabulary`).
GAME_VOCABULARY: dict[str, str] = {
    "climbing-2agent": OPTIONS,
    "penalty-2agent": OPTIONS,
    "repair-2agent": REPAIR_KEYS + REVIEW,
}


def vocabulary(env_id: str, default: str = "AB") -> str:
    """The ``keys`` of :func:`relay_model` for ``env_id``: the matrix games' three options, the
    repair game's two keys and its review request, else ``default`` (the credit games' keys)."""
    return GAME_VOCABULARY.get(env_id, default)


# The training settings under which MARFT learns the relay on CPU (learning test, benchmarks).
RELAY_CONFIG: tuple[str, ...] = (
    "model.max_new_tokens=1",
    "model.lora_dropout=0",
    "model.target_modules=q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
    "env.num_envs=16",
    "train.episodes_per_iteration=32",
    "env.eval_episodes=32",
    "algo.lr=3e-4",
    "algo.critic_lr=3e-3",
    "algo.minibatch_size=16",
    "algo.ppo_epochs=2",
    "algo.gamma=1.0",
    "algo.lam=1.0",
    "algo.ent_coef=0.05",
    "train.checkpoint_every=0",
    "train.log=[]",
)

# Half the episodes per iteration at a higher learning rate: about half the CPU time per run,
# but less robust (on the AB relay it learned on seeds 0 and 1, not 2, within 40 iterations;
# RELAY_CONFIG learns on 12 of 12). bench_credit.py uses it to fit 2 shared CPU cores.
FAST_CONFIG: tuple[str, ...] = (
    *RELAY_CONFIG,
    "train.episodes_per_iteration=16",
    "algo.lr=1e-3",
    "env.eval_episodes=2",
)


def relay_model(
    path: str | Path,
    keys: str = KEYS,
    seed: int = 0,
    hidden_size: int = 64,
    initializer_range: float = 0.2,
    tie_embeddings: bool = False,
    marks: str = "",
) -> Path:
    """Save a tiny random Qwen2 whose vocabulary is ``keys`` plus the special tokens to ``path``.

    The tokenizer deletes every other character, so a prompt is a few special tokens and the
    letters it carries (the key for the sender, the predecessor's message for the others), and
    a random policy picks among ``len(keys) + 4`` tokens. ``marks`` adds characters the
    tokenizer keeps (``marft_envs.credit.ROLE_MARKS``: each credit role prompt ends with its
    seat mark), so the model can read which seat it plays; the role ablation needs them. The
    large ``initializer_range`` makes the random network's output depend clearly on its input
    letter (with the usual 0.02 it barely does, and two agents that ignore each other sit on a
    saddle of the coordination game for a long time). The output head is untied from the input
    embeddings: with tied embeddings the residual stream makes a random model echo the prompt's
    last token, ``<|im_start|>``, so the sender mostly emits special tokens (an empty message)
    and on many seeds the receiver settles on a constant guess before any message carries the
    key. Returns ``path``.
    """
    from .core.models import build_char_tokenizer, build_tiny_model

    path = Path(path)
    tok = build_char_tokenizer(keys + marks, drop_unknown=True)
    model = build_tiny_model(
        tok,
        hidden_size=hidden_size,
        seed=seed,
        initializer_range=initializer_range,
        tie_embeddings=tie_embeddings,
    )
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path
