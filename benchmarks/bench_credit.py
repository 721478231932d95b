"""Credit-assignment games: MARFT (action and token level), MARFT-shared, IPPO, AT-GRPO, MAGRPO
and one agent.

    PYTHONPATH=. python benchmarks/bench_credit.py [--envs ID ...] [--methods marft marft+token ...]
        [--single marft] [--seeds 0 1 2 3 4] [--iterations 30] [--ablation ENV] [--jobs 2]
        [--group-size 4] [--out runs/bench_credit] [key=value ...]

Every method trains on every ``--envs`` id (``marft_envs.credit``) on the same seeds (the seed
initialises the tiny model of ``baselines.relay.relay_model`` and the training), with
``baselines.relay.FAST_CONFIG`` plus any ``key=value`` overrides, for a fixed number of
iterations (no early stop, so every curve has every point). A method is a name from
``baselines.methods.METHODS``; ``NAME+token`` trains it with token-level advantages
(``algo.level=token``). The critic-free methods (``at_grpo``, ``magrpo`` and their ``_shared``
variants) get the PPO methods' generated responses per iteration, in groups of
``--group-size`` (``baselines.methods.equal_compute_overrides``). ``--single`` trains that
method on ``credit-chain-1agent``, where one agent sees the key and answers: the single-agent
baseline shared by every game ("is a team needed?"). ``--ablation ENV`` trains
``--ablation-methods`` on ENV with prescribed roles and with ``roles=False``, on a model that
keeps the role prompts' seat marks (``marft_envs.credit.ROLE_MARKS``).

Prints, per environment and method: the final greedy evaluation score (every key once) and the
mean training score of the last 3 iterations, each as mean and 95% t-interval over seeds; the
episodes played until the first iteration whose training score reached 0.9 (median over the
seeds that did, and how many never did) and the generated tokens until then (median); the
tokens generated in training (mean per run, ``train/generated_tokens``: AT-GRPO's unselected
branches and continuations included); and wall time per run. AT-GRPO's training score is read
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


@dataclass
class RunResult:
    spec: RunSpec
    scores: list[float] = field(default_factory=list)  # training score per iteration
    episodes: list[float] = field(default_factory=list)  # cumulative episodes per iteration
    tokens: list[float] = field(default_factory=list)  # cumulative generated tokens
    final: float = math.nan  # greedy evaluation after training
    wall_s: float = 0.0


def parse_method(name: str) -> tuple[str, tuple[str, ...]]:
    """``"marft"`` or ``"marft+token"`` -> (method, overrides); unknown names list the valid."""
    method, _, level = name.partition("+")
    get_method(method)  # raises naming the valid methods
    if level not in ("", "token", "action"):
        raise ValueError(f"method {name!r}: the suffix must be '+token' or '+action'")
    return method, ((f"algo.level={level}",) if level else ())


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
    from baselines.relay import FAST_CONFIG, relay_model
    from baselines.trainer import Trainer

    torch.set_num_threads(1)
    result = RunResult(spec)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model = relay_model(Path(tmp) / "model", keys="AB", seed=spec.seed, marks=spec.marks)
        overrides = [
            f"env.id={spec.env_id}",
            f"model.name={model}",
            f"train.seed={spec.seed}",
            *FAST_CONFIG,
            *base_overrides,
            *spec.overrides,
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
        result.final = trainer.evaluate(greedy=True)["eval/score"]
    result.wall_s = time.perf_counter() - start
    return result


def plan_runs(args: argparse.Namespace) -> list[RunSpec]:
    """Every run, seed by seed (a benchmark stopped early still compares methods on its seeds)."""
    variants: list[
        tuple[str, str, str, tuple[str, ...], str]
    ] = []  # label, method, env, extra, marks
    for env_id in args.envs:
        for name in args.methods:
            method, extra = parse_method(name)
            variants.append((name, method, env_id, extra, ""))
    if args.single != "none":
        method, extra = parse_method(args.single)
        variants.append((f"single({args.single})", method, SINGLE_ENV, extra, ""))
    if args.ablation:
        for method in args.ablation_methods:
            get_method(method)
            for roles in (True, False):
                extra = (f"env.overrides.roles={str(roles).lower()}",)
                variants.append(
                    (f"{method} roles={roles}", method, args.ablation, extra, ROLE_MARKS)
                )
    return [
        RunSpec(label, method, env_id, seed, args.iterations, extra, marks, args.group_size)
        for seed in args.seeds
        for label, method, env_id, extra, marks in variants
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
    p.add_argument("--out", default="runs/bench_credit")
    p.add_argument(
        "--from-results",
        metavar="JSON",
        help="print the table and redraw the curves from a results.json (a stopped run's too)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args()
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
    print(f"plot: {write_outputs(results, out)}")


if __name__ == "__main__":
    main()
