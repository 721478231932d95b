"""Credit-assignment games: MARFT (action and token level), MARFT-shared, IPPO, AT-GRPO, MAGRPO
and one agent.

    PYTHONPATH=. python benchmarks/bench_credit.py [--envs ID ...] [--methods marft marft+token ...]
        [--single marft] [--seeds 0 1 2 3 4] [--iterations 30] [--ablation ENV] [--jobs 2]
        [--group-size 4] [--dependency chain parallel] [--out runs/bench_credit] [key=value ...]

Every method trains on every ``--envs`` id (``marft_envs.credit``) on the same seeds (the seed
initialises the tiny model of ``baselines.relay.relay_model`` and the training), with
``baselines.relay.FAST_CONFIG`` plus any ``key=value`` overrides, for a fixed number of
iterations (no early stop, so every curve has every point). A method is a name from
``baselines.methods.METHODS``; ``NAME+token`` trains it with token-level advantages
(``algo.level=token``); ``NAME@key=value@...`` trains it with those overrides (e.g.
``marft@algo.adv_norm=agent``: variants of one method side by side). The critic-free methods (``at_grpo``, ``magrpo`` and their ``_shared``
variants) get the PPO methods' generated responses per iteration, in groups of
``--group-size`` (``baselines.methods.equal_compute_overrides``). ``--single`` trains that
method on ``credit-chain-1agent``, where one agent sees the key and answers: the single-agent
baseline shared by every game ("is a team needed?"). ``--ablation ENV`` trains
``--ablation-methods`` on ENV with prescribed roles and with ``roles=False``, on a model that
keeps the role prompts' seat marks (``marft_envs.credit.ROLE_MARKS``). ``--dependency chain
parallel`` trains every method once per dependency matrix (``env.overrides.dependency``; the
label gets the matrix's name), e.g. on the matrix games of ``marft_envs.games``. The tiny
model's vocabulary is ``baselines.relay.vocabulary(env id)``: the games' option letters, else
the credit games' keys ``AB``.

Prints, per environment and method: the final greedy evaluation score (every key once) and the
mean training score of the last 3 iterations, each as mean and 95% t-interval over seeds; the
episodes played until the first iteration whose training score reached 0.9 (median over the
seeds that did, and how many never did) and the generated tokens until then (median); the
tokens generated in training (mean per run, ``train/generated_tokens``: AT-GRPO's unselected
branches and continuations included); and wall time per run; then, per environment, the statistical power of its final greedy scores:
the smallest difference between two rows detectable at 95% (two-sided t-test on the rows'
pooled standard deviation, the seeds given) and the one detected with 80% power. AT-GRPO's training score is read
along its best-of-K branches, so its "to 0.9" columns are optimistic: compare it by the greedy
score. Writes ``results.json`` (every run: per-iteration score, episodes, tokens),
``curves.csv`` and ``curves.png`` (mean training score with 95% bands against generated tokens,
the axis on which every method spends the same). Each run is one process with one torch
thread; ``--jobs`` runs that many at once.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import marft_envs
from baselines.methods import equal_compute_overrides, get_method, preset_of
from marft_envs.credit import ROLE_MARKS
from marft_envs.games import GAMES, OPTIONS

#: the matrix-game ids (bench prints their joint actions and the second seat's best responses)
MATRIX_GAMES = {f"{name}-2agent": game for name, game in GAMES.items()}

SINGLE_ENV = "credit-chain-1agent"
TARGET = 0.9
# Two-sided 95% quantiles of Student's t for 1-30 degrees of freedom (then the normal's 1.96).
T_95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


@dataclass(frozen=True)
class RunSpec:
    """One training run: a labelled method on an environment, one seed."""

    label: str  # e.g. "marft+token", "single(marft)", "marft_shared roles=False"
    method: str
    env_id: str
    seed: int
    iterations: int
    overrides: tuple[str, ...] = ()
    marks: str = ""
    group_size: int = 4  # K of the critic-free methods
    dependency: str = ""  # env.overrides.dependency ("" keeps the id's matrix)


@dataclass
class RunResult:
    spec: RunSpec
    scores: list[float] = field(default_factory=list)  # training score per iteration
    episodes: list[float] = field(default_factory=list)  # cumulative episodes per iteration
    tokens: list[float] = field(default_factory=list)  # cumulative generated tokens
    final: float = math.nan  # greedy evaluation after training
    wall_s: float = 0.0
    joint: list[str] = field(default_factory=list)  # the greedy evaluation's graded answers
    # matrix games: the second seat's greedy reply to each option the first seat may name
    replies: dict[str, str] = field(default_factory=dict)


def parse_method(name: str) -> tuple[str, tuple[str, ...]]:
    """``"marft"``, ``"marft+token"`` or ``"marft@algo.adv_norm=agent@..."`` -> (method,
    overrides): ``@key=value`` parts are that variant's own config overrides (the label is the
    whole name); unknown names list the valid."""
    head, *extra = name.split("@")
    method, _, level = head.partition("+")
    get_method(method)  # raises naming the valid methods
    if level not in ("", "token", "action"):
        raise ValueError(f"method {name!r}: the suffix must be '+token' or '+action'")
    bad = [e for e in extra if "=" not in e]
    if bad:
        raise ValueError(f"method {name!r}: each '@' part must be key=value, got {bad}")
    return method, ((f"algo.level={level}",) if level else ()) + tuple(extra)


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval (0 for a single value)."""
    clean = [v for v in values if not math.isnan(v)]
    if not clean:
        return math.nan, math.nan
    mean = statistics.fmean(clean)
    if len(clean) < 2:
        return mean, 0.0
    df = len(clean) - 1
    t = T_95[df - 1] if df <= len(T_95) else 1.96
    return mean, t * statistics.stdev(clean) / math.sqrt(len(clean))


def episodes_to_target(result: RunResult, target: float = TARGET) -> float | None:
    """Episodes played up to the first iteration whose training score reached ``target``."""
    return _at_target(result, result.episodes, target)


def tokens_to_target(result: RunResult, target: float = TARGET) -> float | None:
    """Tokens generated up to the first iteration whose training score reached ``target``."""
    return _at_target(result, result.tokens, target)


def _at_target(result: RunResult, axis: list[float], target: float) -> float | None:
    for score, x in zip(result.scores, axis, strict=True):
        if score >= target:
            return x
    return None


def train_run(spec: RunSpec, base_overrides: tuple[str, ...]) -> RunResult:
    """Train one run in this process (one torch thread) and return its curve."""
    import torch

    from baselines.core.config import load_config
    from baselines.relay import FAST_CONFIG, relay_model, vocabulary
    from baselines.trainer import Trainer

    torch.set_num_threads(1)
    result = RunResult(spec)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        keys = vocabulary(spec.env_id)
        model = relay_model(Path(tmp) / "model", keys=keys, seed=spec.seed, marks=spec.marks)
        overrides = [
            f"env.id={spec.env_id}",
            f"model.name={model}",
            f"train.seed={spec.seed}",
            *FAST_CONFIG,
            *base_overrides,
            *spec.overrides,
            *((f"env.overrides.dependency={spec.dependency}",) if spec.dependency else ()),
        ]
        # the PPO methods' episodes per iteration fix the budget every method gets
        episodes = load_config("marft", overrides=overrides).train.episodes_per_iteration
        agents = len(marft_envs.make(spec.env_id).possible_agents)
        overrides += [
            f"algo.method={spec.method}",
            *equal_compute_overrides(spec.method, episodes, agents, spec.group_size),
        ]
        cfg = load_config(preset_of(spec.method), overrides=overrides)
        trainer = Trainer(cfg, Path(tmp) / "run")
        episodes = tokens = 0.0
        for _ in range(spec.iterations):
            m = trainer.step()
            episodes += m["train/episodes"]
            tokens += m["train/generated_tokens"]
            result.scores.append(m["train/score"])
            result.episodes.append(episodes)
            result.tokens.append(tokens)
        played = trainer.play_eval(greedy=True)
        result.final = statistics.fmean(ep.score for ep in played)
        result.joint = [str(ep.verdicts[-1]["answer"]) if ep.verdicts else "" for ep in played]
        if spec.env_id in MATRIX_GAMES:
            result.replies = follower_replies(trainer, spec.env_id, spec.dependency)
    result.wall_s = time.perf_counter() - start
    return result


def follower_replies(trainer, env_id: str, dependency: str) -> dict[str, str]:
    """The trained second seat's greedy reply after each option the first seat may name (what
    it sees under its dependency: under ``parallel`` the same prompt every time)."""
    from baselines.core.generation import SamplingSpec

    env = marft_envs.make(env_id, **({"dependency": dependency} if dependency else {}))
    conversations = []
    for option in OPTIONS:
        env.reset(seed=0)
        env.step(option)
        conversations.append(env.messages(env.agent_selection))
    second = env.possible_agents[1]
    sampling = SamplingSpec(trainer.cfg.model.max_new_tokens, greedy=True)
    out = trainer.eval_generator.generate(
        trainer.method.policy_adapter(second), conversations, sampling
    )
    return dict(zip(OPTIONS, out.texts, strict=True))


def matrix_lines(results: list[RunResult]) -> list[str]:
    """Matrix games, per row: the greedy joint actions over seeds, and on how many seeds the
    second seat's greedy replies are the game's best responses to each first option."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        if r.spec.env_id in MATRIX_GAMES:
            groups.setdefault((r.spec.env_id, r.spec.label), []).append(r)
    if not groups:
        return []
    lines = [f"{'matrix game':46s} {'method':24s} {'greedy joint actions':28s} best responses"]
    for (env_id, label), runs in groups.items():
        best = best_responses(MATRIX_GAMES[env_id])
        joints: dict[str, int] = {}
        for r in runs:
            key = r.joint[0] if r.joint else "-"
            joints[key] = joints.get(key, 0) + 1
        shown = " ".join(f"{k}:{v}" for k, v in sorted(joints.items()))
        hits = sum(1 for r in runs if r.replies and all(r.replies[o] in best[o] for o in OPTIONS))
        lines.append(f"{env_id:46s} {label:24s} {shown:28s} {hits}/{len(runs)} seeds")
    return lines


def best_responses(game) -> dict[str, set[str]]:
    """The second seat's best replies to each first option (a set: ties are all best)."""
    out = {}
    for i, row in enumerate(game.payoff):
        top = max(row)
        out[OPTIONS[i]] = {OPTIONS[j] for j, v in enumerate(row) if v == top}
    return out


def initial_policy(env_id: str, seed: int) -> dict[str, float]:
    """The untrained tiny model's next-token distribution for the first seat of ``env_id``: the
    probability of each vocabulary letter, and of everything else (special tokens: an empty,
    invalid reply) under ``"other"``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from baselines.relay import relay_model, vocabulary

    env = marft_envs.make(env_id)
    env.reset(seed=0)
    messages = env.messages(env.agent_selection)
    keys = vocabulary(env_id)
    with tempfile.TemporaryDirectory() as tmp:
        path = relay_model(Path(tmp) / "model", keys=keys, seed=seed)
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path)
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        if not isinstance(ids, torch.Tensor):  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        with torch.no_grad():
            probs = model(ids).logits[0, -1].softmax(-1)
    out = {k: float(probs[tok.convert_tokens_to_ids(k)]) for k in keys}
    out["other"] = 1.0 - sum(out.values())
    return out


def plan_runs(args: argparse.Namespace) -> list[RunSpec]:
    """Every run, seed by seed (a benchmark stopped early still compares methods on its seeds)."""
    variants: list[
        tuple[str, str, str, tuple[str, ...], str, str]
    ] = []  # label, method, env, extra, marks, dependency
    for env_id in args.envs:
        for dependency in args.dependency or [""]:
            for name in args.methods:
                method, extra = parse_method(name)
                label = f"{name} {dependency}" if dependency else name
                variants.append((label, method, env_id, extra, "", dependency))
    if args.single != "none":
        method, extra = parse_method(args.single)
        variants.append((f"single({args.single})", method, SINGLE_ENV, extra, "", ""))
    if args.ablation:
        for method in args.ablation_methods:
            get_method(method)
            for roles in (True, False):
                extra = (f"env.overrides.roles={str(roles).lower()}",)
                variants.append(
                    (f"{method} roles={roles}", method, args.ablation, extra, ROLE_MARKS, "")
                )
    return [
        RunSpec(label, method, env_id, seed, args.iterations, extra, marks, args.group_size, dep)
        for seed in args.seeds
        for label, method, env_id, extra, marks, dep in variants
    ]


def group_key(spec: RunSpec) -> str:
    """The table/plot group of a run: its environment, or the role ablation on it."""
    if spec.marks:
        return f"{spec.env_id} (ablation, seat marks)"
    return spec.env_id


def summarise(results: list[RunResult]) -> list[str]:
    """The printed table: one line per (group, label)."""
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((group_key(r.spec), r.spec.label), []).append(r)
    header = (
        f"{'environment':46s} {'method':24s} {'final greedy':>15s} {'last-3 train':>15s} "
        f"{'episodes to 0.9':>22s} {'tokens to 0.9':>13s} {'tokens/run':>10s} "
        f"{'wall s/run':>10s}"
    )
    lines = [header]
    for (group, label), runs in groups.items():
        final, f_ci = mean_ci([r.final for r in runs])
        last, l_ci = mean_ci([statistics.fmean(r.scores[-3:]) for r in runs])
        reached = [e for e in (episodes_to_target(r) for r in runs) if e is not None]
        median = f"{statistics.median(reached):.0f}" if reached else "-"
        never = len(runs) - len(reached)
        tokens = [t for t in (tokens_to_target(r) for r in runs) if t is not None]
        tokens_median = f"{statistics.median(tokens):.0f}" if tokens else "-"
        lines.append(
            f"{group:46s} {label:24s} {final:7.3f} ± {f_ci:5.3f} {last:7.3f} ± {l_ci:5.3f} "
            f"{median:>8s} (never {never}/{len(runs)}) {tokens_median:>13s} "
            f"{statistics.fmean(r.tokens[-1] for r in runs):10.0f} "
            f"{statistics.fmean(r.wall_s for r in runs):10.1f}"
        )
    return lines


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Cornish-Fisher expansion of the normal's; within 0.01 for df >= 5)."""
    z = statistics.NormalDist().inv_cdf(p)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def detectable_difference(
    groups: list[list[float]], power: float | None = None
) -> tuple[float, int, float]:
    """The smallest difference between two of these groups' means that a two-sided t-test at
    95% would detect (``power=None``: the difference whose own interval just excludes 0; else
    the one detected with that probability), from the pooled standard deviation of every group
    and the median group size. Returns (difference, seeds per group, pooled sd); nan with fewer
    than two values in every group."""
    clean = [[v for v in g if not math.isnan(v)] for g in groups]
    clean = [g for g in clean if len(g) >= 2]
    if not clean:
        return math.nan, 0, math.nan
    ss = sum(sum((v - statistics.fmean(g)) ** 2 for v in g) for g in clean)
    df_pooled = sum(len(g) - 1 for g in clean)
    sd = math.sqrt(ss / df_pooled)
    n = int(statistics.median(len(g) for g in clean))
    df = 2 * n - 2
    t = t_quantile(0.975, df) + (t_quantile(power, df) if power is not None else 0.0)
    return t * sd * math.sqrt(2 / n), n, sd


def power_lines(results: list[RunResult]) -> list[str]:
    """Per environment group: the final greedy score's detectable difference (95%; 95% with
    80% power), the seeds per row and the pooled sd over its rows."""
    groups: dict[str, dict[str, list[float]]] = {}
    for r in results:
        groups.setdefault(group_key(r.spec), {}).setdefault(r.spec.label, []).append(r.final)
    header = (
        f"{'power (final greedy)':46s} {'seeds':>5s} {'pooled sd':>9s} "
        f"{'detectable at 95%':>17s} {'with 80% power':>14s}"
    )
    lines = [header]
    for group, by_label in groups.items():
        rows = list(by_label.values())
        d95, n, sd = detectable_difference(rows)
        d80, _, _ = detectable_difference(rows, power=0.8)
        lines.append(f"{group:46s} {n:5d} {sd:9.3f} {d95:17.3f} {d80:14.3f}")
    return lines


def save_results(results: list[RunResult], out: Path) -> None:
    """``results.json``: every run's spec, curve, final score and wall time."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps([{**asdict(r), "spec": asdict(r.spec)} for r in results], indent=1)
    )


def write_outputs(results: list[RunResult], out: Path) -> Path:
    """``results.json``, ``curves.csv`` and ``curves.png`` (mean with 95% bands per group)."""
    from baselines.core.logging import plot_bands

    save_results(results, out)
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["env", "label", "seed", "iteration", "episodes", "score", "tokens"])
        for r in results:
            for i, (s, e, t) in enumerate(zip(r.scores, r.episodes, r.tokens, strict=True)):
                w.writerow([r.spec.env_id, r.spec.label, r.spec.seed, i + 1, e, s, t])
    panels: dict[str, dict[str, list[list[float]]]] = {}
    by_line: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        by_line.setdefault((group_key(r.spec), r.spec.label), []).append(r)
    for (group, label), runs in by_line.items():
        points = [mean_ci([r.scores[i] for r in runs]) for i in range(len(runs[0].scores))]
        xs = [statistics.fmean(r.tokens[i] for r in runs) for i in range(len(runs[0].tokens))]
        panels.setdefault(group, {})[label] = [
            xs,
            [m for m, _ in points],
            [m - h for m, h in points],
            [m + h for m, h in points],
        ]
    return plot_bands(panels, out / "curves.png", xlabel="generated tokens")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--envs",
        nargs="*",
        default=["credit-chain-3agent", "credit-chain-4agent", "credit-silent-3agent"],
    )
    p.add_argument("--methods", nargs="*", default=["marft", "marft+token", "marft_shared", "ippo"])
    p.add_argument("--single", default="marft", help="method for the 1-agent baseline; 'none'")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--ablation", default="credit-silent-3agent", help="env for roles=False; ''")
    p.add_argument("--ablation-methods", nargs="+", default=["marft_shared", "marft"])
    p.add_argument("--jobs", type=int, default=2, help="runs at once (one process each)")
    p.add_argument("--group-size", type=int, default=4, help="K of the critic-free methods")
    p.add_argument(
        "--dependency",
        nargs="*",
        default=[],
        choices=["chain", "parallel"],
        help="train every method once per dependency matrix (env.overrides.dependency)",
    )
    p.add_argument("--out", default="runs/bench_credit")
    p.add_argument(
        "--from-results",
        metavar="JSON",
        help="print the table and redraw the curves from a results.json (a stopped run's too)",
    )
    p.add_argument(
        "--init-probe",
        metavar="ENV",
        help="print the untrained first seat's option probabilities on ENV per --seeds, and stop",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
    if args.init_probe:
        for seed in args.seeds:
            probs = initial_policy(args.init_probe, seed)
            print(
                f"{args.init_probe} model seed {seed}: "
                + "  ".join(f"{k} {v:.2f}" for k, v in probs.items())
            )
        return
    if args.from_results:
        report(load_results(Path(args.from_results)), Path(args.out))
        return
    runs = plan_runs(args)
    print(f"{len(runs)} runs, {args.jobs} at a time, {args.iterations} iterations each", flush=True)
    results: list[RunResult] = []
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(train_run, spec, tuple(args.overrides)) for spec in runs]
        for future in futures:
            r = future.result()
            results.append(r)
            save_results(results, Path(args.out))  # so far, in case the run is stopped
            reached = episodes_to_target(r)
            print(
                f"{r.spec.env_id:22s} {r.spec.label:24s} seed {r.spec.seed}: final {r.final:.2f}"
                f"  last train {r.scores[-1]:.2f}  to 0.9 {reached}  {r.wall_s:.0f}s",
                flush=True,
            )
    report(results, Path(args.out))


def load_results(path: Path) -> list[RunResult]:
    """The runs saved by :func:`save_results`."""
    rows = json.loads(path.read_text())
    out = []
    for row in rows:
        spec = row.pop("spec")
        spec["overrides"] = tuple(spec["overrides"])
        spec.setdefault("dependency", "")  # results saved before the --dependency option
        out.append(RunResult(spec=RunSpec(**spec), **row))
    return out


def report(results: list[RunResult], out: Path) -> None:
    """Print the table and write the outputs."""
    if not results:
        raise ValueError("no finished runs to report")
    seeds = sorted({r.spec.seed for r in results})
    iterations = max(r.spec.iterations for r in results)
    # the PPO methods' budget: AT-GRPO counts problems, not episodes, in train/episodes
    per = max(r.episodes[0] for r in results if r.episodes)
    print(f"\ncredit games: {iterations} iterations x {per:.0f} episodes, seeds {seeds}")
    print("\n".join(summarise(results)))
    print("\n".join(power_lines(results)))
    for line in matrix_lines(results):
        print(line)
    print(f"plot: {write_outputs(results, out)}")


if __name__ == "__main__":
    main()
