"""Train one seat of any registered team with TRL's ``GRPOTrainer``; the other seats stay fixed.

    from trl import GRPOConfig, GRPOTrainer
    from marft_envs.trl_bridge import seat_dataset, seat_environment_factory, seat_reward

    factory = seat_environment_factory("math-3agent", seat="actor_1", others="echo")
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), reward_funcs=seat_reward,
                          train_dataset=seat_dataset("math-3agent", "actor_1", n=512),
                          environment_factory=factory)

A dataset row is an episode seed. TRL gives each rollout its own :class:`SeatEnvironment`: its
``reset(**row)`` plays the seats before ours and returns our seat's user message (the system
message, the role instructions, is in the row's prompt), and :func:`seat_reward` submits the
completion as the seat's action, lets the seats after it play, and returns the seat's reward.
Rollouts of one row share the seed, hence the task and the predecessors' actions: GRPO's group
baseline compares alternatives from one state. Pass ``url=`` to play on a ``marft-envs serve``
server instead of in this process (the others are then played server-side by a named policy).

Nothing here imports trl or torch; ``datasets`` is imported by :func:`seat_dataset` only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .errors import require_episode
from .prompts import chat_messages
from .registry import make
from .wrappers import SingleSeat

#: A ChatML template that renders tool calls: ``GRPOTrainer(environment_factory=...)`` refuses a
#: tokenizer whose template cannot (real instruct models' templates can; built-in tiny ones not).
TOOL_CAPABLE_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% for c in m.get('tool_calls') or [] %}{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] | tojson }}{% endfor %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class SeatEpisode:
    """One seat's single-turn episodes, in this process or on a server.

    The completion is the seat's one action: teams whose episodes give the seat more than one
    turn (``horizon > 1``) need a multi-turn trainer, and are refused.
    """

    def __init__(
        self, env_id: str, seat: str, others: Any, *, url: str | None = None, **overrides: Any
    ):
        self.env_id, self.seat, self.url = env_id, seat, url
        self._others = others
        self._local: SingleSeat | None = None
        self._client: Any = None
        if url is None:
            self._local = SingleSeat(env_id, seat=seat, others=others, **overrides)
            if self._local.unwrapped_aec.horizon != 1:
                raise ValueError(
                    f"the TRL bridge trains single-turn seats; {env_id!r} has horizon "
                    f"{self._local.unwrapped_aec.horizon} (use horizon=1)"
                )
        else:
            if overrides:
                raise ValueError(
                    f"make() overrides {sorted(overrides)} belong to the server "
                    "(marft-envs serve ID --set KEY=VALUE), not to a client"
                )
            if not isinstance(others, str):
                raise ValueError(
                    "on a server the other seats are played by a named policy; "
                    f"got others={others!r}"
                )
            from .serve import MarftEnvClient

            self._client = MarftEnvClient(base_url=url).sync()
        self.messages: list[dict[str, str]] = []
        self.reward: float | None = None
        self.verdict: dict[str, Any] | None = None
        self._acted = False

    def reset(self, seed: int | None = None, task_id: str | None = None) -> list[dict[str, str]]:
        """Start an episode (the seats before ours play); return the seat's chat messages."""
        self._acted, self.reward, self.verdict = False, None, None
        options = {"task_id": task_id} if task_id is not None else None
        if self._local is not None:
            self._local.reset(seed=seed, options=options)
            self.messages = self._local.unwrapped_aec.messages(self.seat)
        else:
            result = self._client.reset(
                seed=seed, task_id=task_id, seats=[self.seat], others=self._others
            )
            self.messages = result.observation.messages
        return self.messages

    def act(self, text: str) -> float | None:
        """Play ``text`` as the seat's action; the seat's reward (``None``: infrastructure
        error)."""
        # one turn per episode: a second act() is a step after the end
        require_episode("act", has_reset=True, ended=self._acted, hint=" (the seat already acted)")
        self._acted = True
        if self._local is not None:
            _, reward, terminated, truncated, info = self._local.step(text)
            done, self.verdict = terminated or truncated, info.get("verdict")
        else:
            from .serve import MarftAction

            result = self._client.step(MarftAction(agent=self.seat, text=text))
            done, reward, self.verdict = result.done, result.reward, result.metadata.get("verdict")
        if not done:
            raise ValueError(
                f"the episode of {self.env_id!r} goes on after {self.seat!r} acted: "
                "the TRL bridge needs one turn per seat (horizon=1)"
            )
        infra = bool(self.verdict and self.verdict.get("infra_error"))
        self.reward = None if infra else float(reward)  # never score a broken verifier
        return self.reward

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._local is not None:
            self._local.close()


class SeatEnvironment:
    """One rollout for TRL's ``environment_factory``: ``reset(**row)`` and nothing else public.

    TRL turns every other public method into a tool the model may call; the action goes through
    :func:`seat_reward` instead, so the completion itself is the seat's response.
    """

    def __init__(
        self, env_id: str, seat: str, others: Any, *, url: str | None = None, **overrides: Any
    ):
        self.episode = SeatEpisode(env_id, seat, others, url=url, **overrides)

    def reset(self, seed: int | None = None, task_id: str | None = None, **row: Any) -> str:
        """Start the row's episode; return the seat's user message (TRL appends it to the
        prompt)."""
        return self.episode.reset(seed=seed, task_id=task_id)[-1]["content"]


def seat_environment_factory(
    env_id: str, seat: str, others: Any, *, url: str | None = None, **overrides: Any
) -> Callable[[], SeatEnvironment]:
    """The ``environment_factory`` for ``GRPOTrainer``: a fresh :class:`SeatEnvironment` per
    call."""
    SeatEpisode(env_id, seat, others, url=url, **overrides).close()  # fail now on bad input

    def factory() -> SeatEnvironment:
        return SeatEnvironment(env_id, seat, others, url=url, **overrides)

    return factory


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or conversational messages (assistant turns)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if m.get("role") == "assistant")


def seat_reward(
    completions: Sequence[Any], environments: Sequence[SeatEnvironment], **kwargs: Any
) -> list[float | None]:
    """TRL reward function: play each completion as its rollout's seat action; the seat's reward."""
    if environments is None:
        raise ValueError(
            "seat_reward needs GRPOTrainer(environment_factory=seat_environment_factory(...))"
        )
    return [
        env.episode.act(completion_text(c))
        for c, env in zip(completions, environments, strict=True)
    ]


def seat_dataset(env_id: str, seat: str, n: int, *, seed: int = 0, **overrides: Any) -> Any:
    """``n`` rows (a ``datasets.Dataset``): the seat's system message and worked-example turns
    as the prompt, and a seed.

    Row ``i`` has seed ``seed + i``; the seat's user message comes from the environment's reset.
    """
    from datasets import Dataset

    env = make(env_id, **overrides)
    agents = list(env.possible_agents)
    if seat not in agents:
        raise ValueError(f"seat {seat!r} is not an agent of {env_id!r}; agents: {agents}")
    env.reset(seed=seed)
    base = env.unwrapped
    index = agents.index(seat)
    # the role instructions and the seat's worked-example turns: what every episode shares
    prompt = chat_messages(
        base.workflow.roles[index].instructions,
        "",
        base.workflow.example_turns(index, base.horizon),
    )
    env.close()
    return Dataset.from_dict({"prompt": [prompt] * n, "seed": [seed + i for i in range(n)]})


__all__ = [
    "SeatEnvironment",
    "SeatEpisode",
    "completion_text",
    "seat_dataset",
    "seat_environment_factory",
    "seat_reward",
]
