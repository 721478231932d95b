"""The Flex-MG environment: a PettingZoo AEC game where LLM agents act in order.

One AEC turn is one agent's whole response (a string); a round is every agent acting once in
order. After the last agent of a round, the verifier grades the answering agent's response and
the reward is attributed (``reward_to``). The episode ends when the answer is right or after
``horizon`` rounds (``terminated``); ``truncated`` only when something outside the task stopped it
(a turn limit, or a verifier infrastructure error).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

import tasks
from tasks import Dataset, Task

from .episode import Episode, FinalView, Turn
from .errors import require_episode
from .fingerprint import Fingerprint, env_fingerprint
from .prompts import chat_messages, prompt_text, transcript_text, user_text
from .rules import task_index
from .spaces import UnicodeText
from .verdict import RoundPlay, Verdict, grades_rounds
from .verifiers import FEEDBACK_MODES, get_verifier, grader_version
from .workflow import Workflow, get_workflow

REWARD_TO = ("team", "last", "answerer", "graded")
#: Appended to the episode-ended message when a finished agent is stepped with an action.
_DEAD_STEP_HINT = (
    " (a finished agent takes only step(None), which removes it, as agent_iter() does)"
)


def coerce_action(action: Any, max_chars: int) -> tuple[str, str | None]:
    """Turn whatever a policy sent into a string; return it with a note when it was altered."""
    if action is None:
        return "", "none_action"
    if isinstance(action, bytes):
        return action.decode("utf-8", errors="replace")[:max_chars], "bytes_action"
    if not isinstance(action, str):
        return "", f"non_string_action:{type(action).__name__}"
    # Lone surrogates cannot be encoded by tokenizers or JSON writers; replace them.
    try:
        action.encode("utf-8")
    except UnicodeEncodeError:
        action = action.encode("utf-8", errors="replace").decode("utf-8")
    if len(action) > max_chars:
        return action[:max_chars], "action_truncated"
    return action, None


def deterministic_verdict(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict without wall-clock timings, for ``infos``.

    PettingZoo's seed test (and users replaying episodes) need ``infos`` to be a function of the
    seed and the actions alone; timings live in ``episode().verdicts`` instead.
    """
    out = {k: v for k, v in verdict.items() if k != "elapsed"}
    details = out.get("details")
    if isinstance(details, Mapping):
        out["details"] = {
            k: v for k, v in details.items() if "elapsed" not in k and "time" not in k
        }
    return out


# The attributes that make up an episode's state: a snapshot deep-copies exactly these.
_EPISODE_FIELDS = (
    "_seed",
    "_episode_index",
    "task",
    "agents",
    "rewards",
    "_cumulative_rewards",
    "terminations",
    "truncations",
    "infos",
    "round",
    "_history",
    "_turns",
    "_feedbacks",
    "_verdicts",
    "_truncated",
    "_past",
    "_current",
    "_selector",
    "agent_selection",
)


@dataclass(frozen=True)
class EnvSnapshot:
    """An opaque copy of a :class:`FlexMGEnv`'s episode state (:meth:`FlexMGEnv.snapshot`).

    It owns its data: stepping the environment, or another environment restored from the same
    snapshot, never changes it, so one snapshot can seed any number of branches.
    """

    env_id: str | None
    state: dict[str, Any]


class FlexMGEnv(AECEnv):
    """A team of LLM agents on one task per episode (see the module docstring).

    Args:
        dataset: a ``tasks`` dataset name or a :class:`tasks.Dataset`.
        split: dataset split (``"test"``, ``"train"``, ...).
        workflow: a workflow name or a :class:`Workflow` (roles, order, dependency matrix).
        verifier: a verifier name (``"math"``) or an object with ``grade``/``feedback``.
        horizon: rounds per episode.
        feedback: ``"none"``, ``"verdict"`` or ``"tests"`` (code): the message shown between rounds.
        reward_to: ``"team"`` (every agent gets the team reward), ``"last"``, ``"answerer"``, or
            ``"graded"`` (each agent the verifier graded gets its ``Verdict.agent_scores`` entry;
            the answerer the score when the verifier graded only it).
        roles: ``False`` gives every agent the same generic prompt (the roles ablation).
        order: the order ablation, ``"reversed"`` or a permutation of the workflow's positions
            (:meth:`Workflow.reordered`: the matrix and the graded position stay with positions).
        dependency: the dependency ablation, ``"chain"``, ``"parallel"`` or a matrix
            (:meth:`Workflow.with_dependency`), applied after ``order``.
        anonymous_roles: name every role ``agent`` (ids ``agent_0``, ...), keeping each role's
            instructions (:meth:`Workflow.anonymised`).
        seed: default seed of the first ``reset()``.
        stop_on_correct: end the episode at the first correct round (default) or play all rounds.
        max_turns: an outside turn limit; reaching it before the end truncates the episode.
        max_action_chars: longer actions are cut to this length (noted in ``infos``).
    """

    # PettingZoo's AECEnv declares ``metadata`` an attribute (not a ClassVar); it is never mutated.
    metadata: dict[str, Any] = {  # noqa: RUF012
        "name": "flexmg_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        *,
        dataset: str | Dataset = "arith",
        split: str = "test",
        workflow: str | Workflow = "math-trio",
        verifier: str | Any = "math",
        horizon: int = 1,
        feedback: str = "none",
        reward_to: str = "team",
        roles: bool = True,
        order: str | Sequence[int] | None = None,
        dependency: str | Sequence[Sequence[int]] | None = None,
        anonymous_roles: bool = False,
        seed: int | None = None,
        stop_on_correct: bool = True,
        max_turns: int | None = None,
        max_action_chars: int = 200_000,
        data_dir: str | None = None,
        dataset_kwargs: Mapping[str, Any] | None = None,
        verifier_kwargs: Mapping[str, Any] | None = None,
        render_mode: str | None = None,
    ):
        super().__init__()
        if not isinstance(horizon, int) or horizon < 1:
            raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}")
        if feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be one of {FEEDBACK_MODES}, got {feedback!r}")
        if reward_to not in REWARD_TO:
            raise ValueError(f"reward_to must be one of {REWARD_TO}, got {reward_to!r}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got "
                f"{render_mode!r}"
            )
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be >= 1 or None, got {max_turns!r}")

        wf = get_workflow(workflow).ablated(
            order=order, dependency=dependency, anonymous_roles=anonymous_roles
        )
        self.workflow: Workflow = wf if roles else wf.without_roles()
        self.dataset: Dataset = (
            dataset
            if isinstance(dataset, Dataset)
            else tasks.load(dataset, split=split, data_dir=data_dir, **dict(dataset_kwargs or {}))
        )
        if len(self.dataset) == 0:
            raise ValueError(f"Dataset {self.dataset.name!r} split {self.dataset.split!r} is empty")
        if self.dataset.kind != self.workflow.task_kind:
            raise ValueError(
                f"Workflow {self.workflow.name!r} is for {self.workflow.task_kind} tasks but "
                "dataset "
                f"{self.dataset.name!r} holds {self.dataset.kind} tasks"
            )
        self.verifier = get_verifier(verifier, **dict(verifier_kwargs or {}))
        if feedback == "tests" and self.dataset.kind != "code":
            raise ValueError(
                "feedback='tests' needs a code environment; use 'none' or 'verdict' for math"
            )

        self.horizon = horizon
        self.feedback_mode = feedback
        self.reward_to = reward_to
        self.stop_on_correct = stop_on_correct
        self.max_turns = max_turns
        self.max_action_chars = max_action_chars
        self.render_mode = render_mode

        # Only a team whose agents never see same-round actions is a simultaneous game, so only
        # then may PettingZoo's aec_to_parallel convert it (marft_envs.wrappers.parallel_env).
        self.metadata = {**type(self).metadata, "is_parallelizable": self.workflow.is_independent}
        self.possible_agents = self.workflow.agent_ids()
        n = len(self.possible_agents)
        text = UnicodeText()
        entry = spaces.Dict(
            {
                "agent": UnicodeText(),
                "role": UnicodeText(),
                "position": spaces.Discrete(n),
                "action": UnicodeText(),
            }
        )
        past = spaces.Dict(
            {
                "agent": UnicodeText(),
                "role": UnicodeText(),
                "position": spaces.Discrete(n),
                "round": spaces.Discrete(horizon),
                "action": UnicodeText(),
            }
        )
        self.observation_spaces = {
            a: spaces.Dict(
                {
                    "prompt": UnicodeText(),
                    "problem": UnicodeText(),
                    "agent": UnicodeText(),
                    "role": UnicodeText(),
                    "round": spaces.Discrete(horizon),
                    "position": spaces.Discrete(n),
                    "predecessors": spaces.Sequence(entry),
                    "history": spaces.Sequence(past),
                    "feedback": UnicodeText(),
                }
            )
            for a in self.possible_agents
        }
        self.action_spaces = {
            a: UnicodeText(max_length=max_action_chars) for a in self.possible_agents
        }
        self.state_space = text

        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self._episode_index = -1
        self.task: Task | None = None
        self._history: list[dict[str, Any]] = []
        self._turns: list[Turn] = []
        self._feedbacks: list[str] = []
        self._verdicts: list[dict[str, Any]] = []
        self.round = 0
        self.agents: list[str] = []
        self._truncated = False
        self._version = 0  # bumped by every change of the transcript; keys the view cache
        self._view_cache: tuple[tuple[str, int], tuple[str, dict[str, Any], str]] | None = None
        self._state_cache: tuple[int, str] | None = None
        self._agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self._sees = [frozenset(self.workflow.sees(i)) for i in range(len(self.possible_agents))]
        # each agent's worked-example turns (empty without examples), shown before every turn
        self._examples = [
            self.workflow.example_turns(i, self.horizon) for i in range(len(self.possible_agents))
        ]
        self._past: tuple[dict[str, Any], ...] = ()  # earlier rounds' entries, shown to every agent
        self._current: list[tuple[int, dict[str, Any]]] = []  # (position, entry) of this round
        self.spec = None  # set by make()

    # -- PettingZoo API -------------------------------------------------------------------------

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode. ``options={"task_id": ...}`` (or ``"task_index"``) pins the task."""
        if seed is not None:
            self._seed, self._episode_index = int(seed), 0
        else:
            self._episode_index += 1
        # Other option keys are ignored, as PettingZoo's api_test requires.
        options = dict(options or {})
        if "task_id" in options:
            self.task = self.dataset.by_id(options["task_id"])
        elif "task_index" in options:
            self.task = self.dataset[int(options["task_index"])]
        else:
            self.task = self.dataset[task_index(self._seed, self._episode_index, len(self.dataset))]

        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {"task_id": self.task.id, "round": 0} for a in self.agents}
        self.round = 0
        self._history, self._turns, self._feedbacks, self._verdicts = [], [], [], []
        self._truncated = False
        self._past, self._current = (), []
        self._version += 1
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def snapshot(self) -> EnvSnapshot:
        """A copy of the current episode state, for :meth:`restore` (branching rollouts).

        Everything an episode changes is copied (transcript, turns, verdicts, rewards, infos,
        the turn order); the dataset, the workflow and the verifier are shared, as they hold no
        episode state (a code verifier's sandbox runs each program afresh and caches no
        verdicts). Tasks are immutable records and are shared too.
        """
        require_episode("snapshot", has_reset=self.task is not None)
        memo = {id(self.task): self.task}  # the task record is immutable: share it
        state = copy.deepcopy({k: getattr(self, k) for k in _EPISODE_FIELDS}, memo)
        return EnvSnapshot(self.spec.id if self.spec is not None else None, state)

    def restore(self, snapshot: EnvSnapshot) -> None:
        """Put the environment back into ``snapshot``'s state (taken from this environment
        or from another instance of the same id); the snapshot stays usable for more
        branches. The same snapshot and the same actions give the same observations, rewards
        and infos."""
        if not isinstance(snapshot, EnvSnapshot):
            raise TypeError(
                f"restore() takes an EnvSnapshot from env.snapshot(), got {type(snapshot).__name__}"
            )
        own = self.spec.id if self.spec is not None else None
        if snapshot.env_id != own:
            raise ValueError(
                f"snapshot of environment {snapshot.env_id!r} cannot be restored into {own!r}"
            )
        memo = {id(snapshot.state["task"]): snapshot.state["task"]}
        for k, v in copy.deepcopy(snapshot.state, memo).items():
            setattr(self, k, v)
        self._version += 1  # invalidates the cached views and state text

    def observe(self, agent: str) -> dict[str, Any]:
        """What ``agent`` sees now: the rendered prompt plus the same facts as structured data."""
        require_episode("observe", has_reset=self.task is not None)
        return self._view(agent)[1]

    def last(self, observe: bool = True) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """PettingZoo's ``last()``, with the order error before ``reset()`` and after the end."""
        require_episode("last", has_reset=self.task is not None, ended=not self.agents)
        return super().last(observe)

    def messages(self, agent: str) -> list[dict[str, str]]:
        """The same view as :meth:`observe`, as chat messages for a tokenizer's chat template."""
        require_episode("messages", has_reset=self.task is not None)
        instructions, _, user = self._view(agent)
        return chat_messages(instructions, user, self._examples[self._agent_index[agent]])

    def _view(self, agent: str) -> tuple[str, dict[str, Any], str]:
        """(role instructions, observation dict, user text) for ``agent``, cached until the next
        step."""
        key = (agent, self._version)
        if self._view_cache is not None and self._view_cache[0] == key:
            return self._view_cache[1]
        view = self._build_view(agent)
        self._view_cache = (key, view)
        return view

    def _build_view(self, agent: str) -> tuple[str, dict[str, Any], str]:
        i = self._agent_index.get(agent)
        if i is None:
            raise KeyError(f"Unknown agent {agent!r}; agents: {self.possible_agents}")
        role = self.workflow.roles[i]
        problem = self._task.prompt if role.sees_problem else ""
        seen = self._sees[i]
        preds = tuple(p for j, p in self._current if j in seen)
        round_index = min(self.round, self.horizon - 1)
        user = user_text(
            agent=agent,
            role=role.name,
            problem=problem,
            round_index=round_index,
            horizon=self.horizon,
            history=self._past,
            feedbacks=self._feedbacks,
            predecessors=preds,
        )
        return (
            role.instructions,
            {
                "prompt": prompt_text(role.instructions, user, self._examples[i]),
                "problem": problem,
                "agent": agent,
                "role": role.name,
                "round": round_index,
                "position": i,
                "predecessors": preds,
                "history": self._past,
                "feedback": self._feedbacks[-1] if self._feedbacks and self.round > 0 else "",
            },
            user,
        )

    def state(self) -> str:
        """The global view for a centralized critic: the problem and the whole transcript so far."""
        require_episode("state", has_reset=self.task is not None)
        if self._state_cache is None or self._state_cache[0] != self._version:
            self._state_cache = (
                self._version,
                transcript_text(self._task.prompt, self._history, self._feedbacks, self._verdicts),
            )
        return self._state_cache[1]

    def step(self, action: Any) -> None:
        require_episode("step", has_reset=self.task is not None, ended=not self.agents)
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            # PettingZoo: each finished agent is stepped with None once, which removes it
            require_episode("step", has_reset=True, ended=action is not None, hint=_DEAD_STEP_HINT)
            self._was_dead_step(None)
            return
        i = self._agent_index[agent]
        text, note = coerce_action(action, self.max_action_chars)
        instructions, obs, user = self._view(agent)
        self._turns.append(
            Turn(
                agent=agent,
                role=self.workflow.roles[i].name,
                position=i,
                round=self.round,
                observation=obs,
                messages=chat_messages(instructions, user, self._examples[i]),
                state=self.state(),
                action=text,
            )
        )
        role = self.workflow.roles[i].name
        self._history.append(
            {"agent": agent, "role": role, "position": i, "round": self.round, "action": text}
        )
        self._current.append((i, {"agent": agent, "role": role, "position": i, "action": text}))
        self._version += 1
        self._clear_rewards()
        self.infos[agent] = (
            {**self.infos[agent], "action_note": note} if note else self.infos[agent]
        )

        if self._selector.is_last():
            self._end_round()
        elif self.max_turns is not None and len(self._turns) >= self.max_turns:
            self._finish(truncated=True)
        self.agent_selection = self._selector.next()
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    # -- episode rules ----------------------------------------------------------------------------

    def _end_round(self) -> None:
        answerer = self.possible_agents[self.workflow.answerer_index]
        response = self._history[-len(self.possible_agents) + self.workflow.answerer_index][
            "action"
        ]
        start = time.perf_counter()
        verdict: Verdict
        if grades_rounds(self.verifier):  # it grades every seat's response of the round
            n = len(self.possible_agents)
            this_round = self._history[-n:]
            verdict = self.verifier.grade_round(
                RoundPlay(
                    actions={e["agent"]: e["action"] for e in this_round},
                    roles={e["agent"]: e["role"] for e in this_round},
                    answerer=answerer,
                    round=self.round,
                    horizon=self.horizon,
                    history=tuple(dict(e) for e in self._past),
                ),
                self._task,
            )
        else:
            verdict = self.verifier.grade(response, self._task)
        elapsed = time.perf_counter() - start
        vdict = {
            **verdict.to_dict(),
            "elapsed": verdict.elapsed or elapsed,
            "round": self.round,
            "answerer": answerer,
        }
        if verdict.grader_version is None:  # a third-party verifier's: name what it declares
            vdict["grader_version"] = grader_version(self.verifier)
        self._verdicts.append(vdict)
        public = deterministic_verdict(vdict)
        self._version += 1  # the verdict is part of state()
        for a in self.agents:
            self.rewards[a] = (
                self._graded_share(a, answerer, verdict)
                if self.reward_to == "graded"
                else self._attributed(a, answerer, verdict.score)
            )
            self.infos[a] = {
                "task_id": self._task.id,
                "round": self.round,
                "verdict": public,
                "answerer": answerer,
            }
        for t in self._turns:
            if t.round == self.round:
                t.reward = self.rewards[t.agent]

        last_round = self.round + 1 >= self.horizon
        if verdict.infra_error:
            self._finish(truncated=True)
        elif last_round or (self.stop_on_correct and verdict.correct):
            self._finish(truncated=False)
        else:
            self._next_round(response, verdict)
            # cut by the turn limit after the transition, so the episode stops at the state the
            # next round would start from (what a trainer bootstraps from)
            if self.max_turns is not None and len(self._turns) >= self.max_turns:
                self._finish(truncated=True)

    def _next_round(self, response: str, verdict: Verdict) -> None:
        self._feedbacks.append(
            self.verifier.feedback(response, self._task, verdict, self.feedback_mode)
            if self.feedback_mode != "none"
            else ""
        )
        self._past = self._past + tuple(dict(e) for e in self._history if e["round"] == self.round)
        self._current = []
        self.round += 1
        self._version += 1
        for a in self.agents:
            self.infos[a]["round"] = self.round

    @staticmethod
    def _graded_share(agent: str, answerer: str, verdict: Verdict) -> float:
        """``reward_to="graded"``: the agent's ``Verdict.agent_scores`` entry (0 when the
        verifier did not grade it); a verdict without entries pays the answerer the score."""
        if verdict.agent_scores:
            return float(verdict.agent_scores.get(agent, 0.0))
        return float(verdict.score) if agent == answerer else 0.0

    def _attributed(self, agent: str, answerer: str, score: float) -> float:
        if self.reward_to == "team":
            return float(score)
        target = self.possible_agents[-1] if self.reward_to == "last" else answerer
        return float(score) if agent == target else 0.0

    def _finish(self, *, truncated: bool) -> None:
        self._truncated = truncated
        for a in self.agents:
            if truncated:
                self.truncations[a] = True
            else:
                self.terminations[a] = True

    @property
    def _task(self) -> Task:
        """The current task; reset() picks it."""
        if self.task is None:
            raise RuntimeError("call reset() before using the environment")
        return self.task

    # -- identity ---------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> Fingerprint:
        """This environment's :class:`~marft_envs.fingerprint.Fingerprint` (workflow, prompts,
        dataset, verifier, grader version, episode rules), computed from what it was built with:
        an environment made with overrides has its own, never the registered id's."""
        return env_fingerprint(self)

    # -- records and rendering --------------------------------------------------------------------

    def episode(self) -> Episode:
        """The record of the current (or just finished) episode; before ``reset()`` there is
        none (:class:`~marft_envs.errors.EnvOrderError`, as for the other methods)."""
        require_episode("episode", has_reset=self.task is not None)
        last = self._verdicts[-1] if self._verdicts else None
        returns: dict[str, float] = dict.fromkeys(self.possible_agents, 0.0)
        for t in self._turns:
            returns[t.agent] += t.reward
        answer_pos = self.workflow.answerer_index
        answers = [t.action for t in self._turns if t.position == answer_pos]
        return Episode(
            env_id=spec.id if (spec := getattr(self, "spec", None)) is not None else None,
            task_id=self.task.id if self.task else "",
            seed=self._seed,
            turns=list(self._turns),
            verdicts=list(self._verdicts),
            returns=returns,
            score=float(last["score"]) if last else 0.0,
            correct=bool(last["correct"]) if last else False,
            infra_error=bool(last["infra_error"]) if last else False,
            truncated=self._truncated,
            final_output=answers[-1] if answers else "",
            final_view=self._final_view() if self._truncated else None,
        )

    def _final_view(self) -> FinalView:
        """Where a truncated episode stopped (``agent_selection`` is the agent that acts next)."""
        nxt = self.agent_selection
        return FinalView(
            agent=nxt,
            role=self.workflow.roles[self._agent_index[nxt]].name,
            state=self.state(),
            messages={a: self._next_turn_messages(a) for a in self.possible_agents},
        )

    def _next_turn_messages(self, agent: str) -> list[dict[str, str]]:
        """What ``agent`` would see on its next turn: its view now, or, if it already acted in
        the round the cut left unfinished, the next round's view, that round's actions so far
        in its history (and no feedback: the round was never graded). An independent learner
        bootstraps from the observation after its own action, not the one it acted on."""
        i = self._agent_index[agent]
        if all(j != i for j, _ in self._current):
            return self.messages(agent)
        role = self.workflow.roles[i]
        unfinished = tuple(dict(e) for e in self._history if e["round"] == self.round)
        user = user_text(
            agent=agent,
            role=role.name,
            problem=self._task.prompt if role.sees_problem else "",
            round_index=self.round + 1,
            horizon=self.horizon,
            history=self._past + unfinished,
            feedbacks=self._feedbacks,
            predecessors=(),
        )
        return chat_messages(role.instructions, user, self._examples[i])

    def render(self) -> str | None:
        if self.render_mode is None:
            return None
        require_episode("render", has_reset=self.task is not None)
        text = transcript_text(self._task.prompt, self._history, self._feedbacks, self._verdicts)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        close = getattr(self.verifier, "close", None)
        if callable(close):
            close()
