"""Games whose answer is known in advance from the cooperative MARL literature.

Each is a registered id built from the public workflow API, so the methods can be compared where
they must differ:

- ``climbing-2agent`` and ``penalty-2agent``: the climbing and penalty games of Claus and
  Boutilier (1998), "The dynamics of reinforcement learning in cooperative multiagent systems".
  Each agent names one of three options (``A``, ``B``, ``C``); the team's payoff is the game's
  matrix entry (:data:`CLIMBING`, :data:`PENALTY`; the first seat to act picks the row), scaled
  to [0, 1] by ``(r - min) / (max - min)``; a response that is not exactly one option scores 0,
  the matrix's minimum. Both agents' outputs count: the verifier grades the whole round
  (:class:`~marft_envs.verdict.RoundVerifier`) and names both agents in
  ``Verdict.agent_scores``. Independent learners settle on a safe suboptimal joint action
  (relative overgeneralisation: against a partner who still explores, the optimal option's
  expected payoff is the worst). The registered ids use MARFT's chain (the second agent sees
  the first one's choice), which makes the game sequential: the second agent can best-respond
  and the optimum becomes reachable. ``make(id, dependency="parallel")`` is the simultaneous
  game of the paper.
- ``repair-2agent``: two rounds with verdict feedback; only the last round's answer earns a
  reward. The hidden key (``A`` or ``B``, the ``keys`` dataset) is seen by nobody. In round 1
  the drafter (first seat) may write ``C``, which asks for a review: the round-1 verdict then
  shows the key in the feedback every agent reads in round 2, where the fixer (the answering
  seat) is scored 1 for answering it. Without a review the fixer can only guess (0.5). So the
  credit for the round-2 reward must flow back across rounds and agents to the drafter's
  round-1 action; MARFT's sequential GAE with ``lam < 1`` discounts it over three agent steps
  (drafter, fixer, drafter, fixer) where IPPO's per-agent GAE discounts it over one (the
  drafter's own next turn).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tasks
from tasks import Loaded, Task

from .registry import register_team_env
from .verdict import RoundPlay, Verdict
from .verifiers import register_verifier
from .workflow import Role, Workflow, register_workflow, workflow_names

#: The options every matrix game offers, in row/column order.
OPTIONS = "ABC"
#: The drafter's round-1 request for a review in ``repair-2agent``.
REVIEW = "C"
#: The hidden keys of ``repair-2agent``.
REPAIR_KEYS = "AB"


@dataclass(frozen=True)
class MatrixGame:
    """A two-player common-payoff matrix game: ``payoff[row][column]`` in the paper's units;
    the first seat to act picks the row, the second the column."""

    name: str
    payoff: tuple[tuple[float, ...], ...]
    source: str

    def __post_init__(self) -> None:
        n = len(OPTIONS)
        if len(self.payoff) != n or any(len(row) != n for row in self.payoff):
            raise ValueError(f"MatrixGame {self.name!r}: payoff must be {n}x{n}")

    @property
    def low(self) -> float:
        return min(min(row) for row in self.payoff)

    @property
    def high(self) -> float:
        return max(max(row) for row in self.payoff)

    def scaled(self, row: int, column: int) -> float:
        """The payoff of a joint action, scaled to [0, 1] (the matrix's min -> 0, max -> 1)."""
        return (self.payoff[row][column] - self.low) / (self.high - self.low)

    def optima(self) -> list[str]:
        """The optimal joint actions, as ``"AA"`` (row option, column option)."""
        return [
            OPTIONS[i] + OPTIONS[j]
            for i, row in enumerate(self.payoff)
            for j, v in enumerate(row)
            if v == self.high
        ]

    def expected_against_uniform(self) -> list[float]:
        """Each row's mean payoff against a uniformly random column: the relative
        overgeneralisation that draws independent learners to a safe row."""
        return [sum(row) / len(row) for row in self.payoff]


#: Claus and Boutilier (1998), Table 3: optimum (A, A) = 11 guarded by -30; safe (C, C) = 5.
CLIMBING = MatrixGame(
    "climbing",
    ((11.0, -30.0, 0.0), (-30.0, 7.0, 6.0), (0.0, 0.0, 5.0)),
    "Claus and Boutilier 1998, the climbing game",
)
#: Claus and Boutilier (1998), Table 4 with penalty k = -10: optima (A, A) and (C, C) = 10,
#: miscoordination between them costs -10; safe (B, B) = 2.
PENALTY = MatrixGame(
    "penalty",
    ((10.0, 0.0, -10.0), (0.0, 2.0, 0.0), (-10.0, 0.0, 10.0)),
    "Claus and Boutilier 1998, the penalty game with k = -10",
)
GAMES: dict[str, MatrixGame] = {g.name: g for g in (CLIMBING, PENALTY)}

GAME_PROMPT = "Name one option: A, B or C."


def load_matrix_game(split: str, data_dir: Path | None, *, game: str = "climbing") -> Loaded:
    """The one task of a matrix game (``game`` from :data:`GAMES`); its metadata names the game,
    which the ``matrix-game`` verifier reads, and its answer lists the optimal joint actions."""
    if game not in GAMES:
        raise ValueError(f"matrix-game: game must be one of {sorted(GAMES)}, got {game!r}")
    g = GAMES[game]
    task = Task(
        id=f"{game}-game",
        kind="math",
        prompt=GAME_PROMPT,
        answer=" or ".join(g.optima()),
        metadata={"game": game, "source": g.source},
    )
    return Loaded([task], f"generated:matrix-game?game={game}")


def parse_option(response: Any) -> int | None:
    """The index in :data:`OPTIONS` of a response that is exactly one option (spaces
    stripped), else None."""
    text = response.strip() if isinstance(response, str) else ""
    return OPTIONS.index(text) if len(text) == 1 and text in OPTIONS else None


class MatrixGameVerifier:
    """Grades a round of a matrix game: the first two seats' options index the payoff matrix of
    the task's game (``task.metadata["game"]``). Every graded agent gets the team payoff in
    ``agent_scores``; ``correct`` means an optimal joint action."""

    name = "matrix-game"
    version = "matrix-game-1"

    def fingerprint_settings(self) -> dict[str, Any]:
        """The matrices and the invalid-response rule (part of an environment's fingerprint)."""
        return {
            "options": OPTIONS,
            "games": {k: [list(r) for r in g.payoff] for k, g in sorted(GAMES.items())},
            "invalid_score": 0.0,
        }

    def known_pair(self, dataset: Any, task: Task) -> tuple[str, str]:
        """A response that wins when every seat plays it (the first optimum's option) and one
        that scores 0 (not an option): the conformance suite's reward check."""
        game = GAMES[str(task.metadata["game"])]
        best = next(o[0] for o in game.optima() if o[0] == o[1])
        return best, "none"

    def grade(self, response: str, task: Task) -> Verdict:
        """Not defined for one response: the payoff needs both seats (use grade_round)."""
        raise TypeError(
            "the matrix-game verifier grades whole rounds (both seats' options): call "
            "grade_round(RoundPlay, task), as FlexMGEnv does"
        )

    def grade_round(self, play: RoundPlay, task: Task) -> Verdict:
        game = GAMES[str(task.metadata["game"])]
        seats = play.order[:2]
        if len(seats) != 2:
            raise ValueError(f"a matrix game needs two seats, the round has {list(play.order)}")
        picks = [parse_option(play.actions[a]) for a in seats]
        joint = "".join(OPTIONS[p] if p is not None else "?" for p in picks)
        if picks[0] is None or picks[1] is None:
            score, reason, raw = 0.0, "invalid", None
        else:
            score = game.scaled(picks[0], picks[1])
            raw = game.payoff[picks[0]][picks[1]]
            reason = "optimal" if raw == game.high else "suboptimal"
        return Verdict(
            correct=reason == "optimal",
            answer=joint,
            reason=reason,
            score=score,
            details={"game": game.name, "payoff": raw},
            agent_scores=dict.fromkeys(seats, score),
        )

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str:
        if mode == "verdict":
            return f"Feedback: the joint action {verdict.answer} scored {verdict.score:.3g}."
        if mode == "none":
            return ""
        raise ValueError(
            f"The matrix-game verifier supports feedback 'none' or 'verdict', not {mode!r}"
        )


class RepairVerifier:
    """``repair-2agent``'s grader: round scores are 0 except the last round's, which is 1 when
    the answering seat names the hidden key; a first-round ``C`` from the first seat puts the key
    into that round's verdict (``details["review"]``), which the feedback shows."""

    name = "repair"
    version = "repair-1"

    def fingerprint_settings(self) -> dict[str, Any]:
        """The review request and the scoring rule (part of an environment's fingerprint)."""
        return {"review": REVIEW, "scored": "last round, answering seat, exact key"}

    def known_pair(self, dataset: Any, task: Task) -> tuple[str, str]:
        """The key (every seat says it: no review, but the last answer is right) and the other
        key: the conformance suite's reward check."""
        other = next(t.answer for t in dataset if t.answer != task.answer)
        return str(task.answer), str(other)

    def grade(self, response: str, task: Task) -> Verdict:
        """The last round's rule on the answer alone (what a re-grader of final outputs uses)."""
        text = response.strip() if isinstance(response, str) else ""
        ok = text == task.answer
        return Verdict(
            correct=ok, answer=text or None, reason="exact" if ok else "mismatch", score=float(ok)
        )

    def grade_round(self, play: RoundPlay, task: Task) -> Verdict:
        if play.final:
            return self.grade(play.actions[play.answerer], task)
        first = play.order[0]
        asked = play.round == 0 and play.actions[first].strip() == REVIEW
        text = play.actions[play.answerer].strip()
        return Verdict(
            correct=False,
            answer=text or None,
            reason="not-final",
            score=0.0,
            details={"review": task.answer if asked else ""},
        )

    def feedback(self, response: str, task: Task, verdict: Verdict, mode: str) -> str:
        if mode == "verdict":
            review = verdict.details.get("review", "")
            return f"Review: the answer is {review}." if review else "No review."
        if mode == "none":
            return ""
        raise ValueError(f"The repair verifier supports feedback 'none' or 'verdict', not {mode!r}")


_CHOOSE = "Name one option, A, B or C: reply with the letter alone. The team is paid for the pair."
FIRST = Role("first", _CHOOSE)
SECOND = Role("second", _CHOOSE)
MATRIX_WORKFLOW = Workflow(
    "matrix-game",
    (FIRST, SECOND),
    "math",
    description="two agents each name an option; the second sees the first's (chain)",
)
DRAFTER = Role(
    "drafter",
    "Draft the answer, A or B, or write C to have the answer reviewed. Reply with one letter.",
    sees_problem=False,
)
FIXER = Role(
    "fixer",
    "Answer A or B; only the last round's answer counts. Reply with one letter.",
    sees_problem=False,
)
REPAIR_WORKFLOW = Workflow(
    "repair",
    (DRAFTER, FIXER),
    "math",
    description="a drafter whose round-1 review request lets the fixer repair the answer",
)


def game_env_ids() -> list[str]:
    """The ids of this module without their version (``make`` builds the newest)."""
    return ["climbing-2agent", "penalty-2agent", "repair-2agent"]


def register_game_envs() -> None:
    """Register the dataset, the verifiers, the workflows and the ids (idempotent)."""
    tasks.register_dataset(
        "matrix-game",
        load_matrix_game,
        splits=("train", "test"),
        kind="math",
        needs_data=False,
        description="The one task of a Claus-Boutilier matrix game (game='climbing' or 'penalty')",
    )
    register_verifier(MatrixGameVerifier.name, MatrixGameVerifier)
    register_verifier(RepairVerifier.name, RepairVerifier)
    for wf in (MATRIX_WORKFLOW, REPAIR_WORKFLOW):
        if wf.name not in workflow_names():
            register_workflow(wf)
    for game in GAMES.values():
        register_team_env(
            f"{game.name}-2agent-v1",
            dataset="matrix-game",
            split="test",
            workflow=MATRIX_WORKFLOW.name,
            verifier=MatrixGameVerifier.name,
            description=f"{game.source}, scaled to [0, 1]; the second agent sees the first",
            dataset_kwargs={"game": game.name},
        )
    register_team_env(
        "repair-2agent-v1",
        dataset="keys",
        split="test",
        workflow=REPAIR_WORKFLOW.name,
        verifier=RepairVerifier.name,
        description="two rounds, verdict feedback: a round-1 review request decides the repair",
        dataset_kwargs={"keys": REPAIR_KEYS},
        horizon=2,
        feedback="verdict",
    )


def joint_payoffs(game: MatrixGame) -> Mapping[str, float]:
    """Every joint action's scaled payoff, ``{"AA": 1.0, ...}`` (for docs and tests)."""
    return {
        OPTIONS[i] + OPTIONS[j]: game.scaled(i, j)
        for i in range(len(OPTIONS))
        for j in range(len(OPTIONS))
    }
