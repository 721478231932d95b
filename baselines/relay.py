"""``relay-2agent``: a two-agent credit-assignment game built only with marft_envs' public API.

Only agent 0 (``sender_0``) sees the task, a one-letter key; only agent 1 (``receiver_1``), who
does not see the task (``Role(sees_problem=False)``), is graded: it scores 1 when its response is
exactly the key. The team can only win if the sender encodes the key in its message and the
receiver decodes it, so credit must flow through the predecessor channel. Used by the learning
test, the learning-curve benchmark and the memory/overhead benchmarks.

With the tiny character model of :func:`relay_model` (vocabulary: the key letters and four
special tokens; other characters are dropped) and ``max_new_tokens=1``, an untrained team
answers right by chance only.
"""

from __future__ import annotations

from pathlib import Path

import marft_envs
from marft_envs import Role, Verdict, Workflow
from tasks import Dataset, Task

ENV_ID = "relay-2agent"
KEYS = "ABCD"


def relay_dataset(keys: str = KEYS, split: str = "train") -> Dataset:
    """One task per key letter; the prompt is the bare key (the receiver never sees it)."""
    tasks = tuple(Task(id=f"relay-{k}", kind="math", prompt=k, answer=k) for k in keys)
    return Dataset(name="relay", split=split, kind="math", tasks=tasks, source="generated:relay")


class RelayVerifier:
    """Correct iff the stripped response equals the key."""

    name = "relay"

    def grade(self, response, task: Task) -> Verdict:
        text = response.strip() if isinstance(response, str) else ""
        ok = text == task.answer
        return Verdict(
            correct=ok,
            answer=text or None,
            reason="exact" if ok else "mismatch",
            score=1.0 if ok else 0.0,
        )

    def feedback(self, response, task: Task, verdict: Verdict, mode: str) -> str:
        return "" if mode == "none" else f"Feedback: {'correct' if verdict.correct else 'wrong'}."


RELAY_WORKFLOW = Workflow(
    name="relay",
    roles=(
        Role("sender", "Send.", sees_problem=True),
        Role("receiver", "Say.", sees_problem=False),
    ),
    task_kind="math",
    answerer=1,
    description="only the sender sees the key; only the receiver is graded",
)


def register_relay(env_id: str = ENV_ID, keys: str = KEYS) -> str:
    """Register the relay environment under ``env_id`` (idempotent); returns the id."""
    if env_id not in marft_envs.registry:
        marft_envs.register(
            env_id,
            "marft_envs.flexmg:FlexMGEnv",
            kwargs={
                "dataset": relay_dataset(keys),
                "workflow": RELAY_WORKFLOW,
                "verifier": RelayVerifier(),
                "horizon": 1,
                "feedback": "none",
                "reward_to": "team",
            },
        )
    return env_id


# The training settings under which MARFT learns the relay on CPU (learning test, curves benchmark).
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


def relay_model(
    path: str | Path,
    keys: str = KEYS,
    seed: int = 0,
    hidden_size: int = 64,
    initializer_range: float = 0.2,
    tie_embeddings: bool = False,
) -> Path:
    """Save a tiny random Qwen2 whose vocabulary is ``keys`` plus the special tokens to ``path``.

    The tokenizer deletes every other character, so a prompt is a few special tokens and the
    letters it carries (the key for the sender, the sender's message for the receiver), and a
    random policy picks among 6 tokens. The large ``initializer_range`` makes the random
    network's output depend clearly on its input letter (with the usual 0.02 it barely does,
    and two agents that ignore each other sit on a saddle of the coordination game for a long
    time). The output head is untied from the input embeddings: with tied embeddings the
    residual stream makes a random model echo the prompt's last token, ``<|im_start|>``, so the
    sender mostly emits special tokens (an empty message) and on many seeds the receiver settles
    on a constant guess before any message carries the key. Returns ``path``.
    """
    from .core.models import build_char_tokenizer, build_tiny_model

    path = Path(path)
    tok = build_char_tokenizer(keys, drop_unknown=True)
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
