"""Side by side with what users would install instead: CoMLRL 1.4.3 and TRL on the same work.

    make peers                                  # CoMLRL into .cache/bench-peers (not the venv)
    PYTHONPATH=. python benchmarks/bench_peers.py [--model smollm2-135m] [--seed 0]
        [--systems ours comlrl-lora comlrl-full ours-seat trl-grpo] [--iterations 3] [--warmup 1]
        [--eval-problems 200] [--malloc] [--threads 2] [--out runs/bench_peers]

Two groups of systems, each on the same task, model, prompts, reward and sampling (12 new
tokens, temperature 0.7, top-p 1) with the same number of generated responses per iteration:

- team (``arith0-2agent``, 4 problems x 4 samples x 2 agents = 32 responses): ours MAGRPO
  (``baselines.demo.RECIPE``: one base, a LoRA adapter per agent, PPO-clip, 2 epochs) against
  CoMLRL's ``MAGRPOTrainer`` (one model per agent; full fine-tune, and with a LoRA adapter of
  our rank and learning rate). ``--malloc`` adds ``ours-mmap``: ours on this task again with
  ``MALLOC_MMAP_THRESHOLD_=65536`` (the setting of bench_memory.py), in a group of its own after
  the others (memory: see ``GROUPS``); the same seed trains the same way, so its scores repeat
  ours' and only time and memory differ.
- seat (the solver's seat of ``arith0-2agent``, the answerer echoing it; 8 problems x 4 samples
  = 32 responses): ours on that seat alone (MAGRPO of one agent = GRPO with PPO-clip) against
  TRL's ``GRPOTrainer`` through ``marft_envs.trl_bridge``.

Each system lives in its own process (so its peak resident memory is its own) and the
processes of a group take turns: every system is evaluated before training, then iteration
``i`` of every system runs before iteration ``i + 1`` of any (the order rotates), then every
system is evaluated again; load on the machine falls on all of them alike. Printed per system:
seconds per iteration split into generation and update (median over ``--iterations`` after
``--warmup`` untimed ones; "update" is everything that is not generation: rewards, scoring
passes, backward, optimiser), generated tokens per second of generation, peak resident memory
of the process, trainable parameters, and the greedy score before and after on the same
``--eval-problems`` test problems (the project's evaluator for every system) with Wilson 95%
intervals; then the ratios ours / peer. Differences that cannot be matched are listed in
docs/performance.md. CoMLRL is optional: without ``make peers`` its rows are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from leaderboard.regrade import wilson_interval  # noqa: E402 (light: no torch)

MMAP_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
DEFAULT_SYSTEMS = ["ours", "comlrl-lora", "comlrl-full", "ours-seat", "trl-grpo"]
# ours-mmap (the team task) is a group of its own: four processes at once in the team group
# (CoMLRL's full fine-tune alone peaks at ~6 GiB) would not fit beside other work in 24 GB.
GROUPS = {"ours": "team", "ours-mmap": "mmap", "comlrl-lora": "team", "comlrl-full": "team",
          "ours-seat": "seat", "trl-grpo": "seat"}
LABELS = {
    "ours": "ours MAGRPO (LoRA r=8, PPO-clip, 2 epochs)",
    "ours-mmap": "ours MAGRPO, MALLOC_MMAP_THRESHOLD_=65536",
    "comlrl-lora": "CoMLRL 1.4.3 MAGRPO + LoRA (same r, lr)",
    "comlrl-full": "CoMLRL 1.4.3 MAGRPO full fine-tune",
    "ours-seat": "ours GRPO, solver seat (LoRA r=8, PPO-clip, 2 epochs)",
    "trl-grpo": "TRL GRPOTrainer + LoRA, solver seat (trl_bridge)",
}
PAIRS = (("ours", "comlrl-lora"), ("ours", "comlrl-full"), ("ours-seat", "trl-grpo"),
         ("ours", "ours-mmap"))


# ----------------------------------------------------------------------------- child side


def child(name: str, settings: dict) -> None:
    """Serve one system: JSON commands on stdin, one JSON reply per line on the original
    stdout (everything the libraries print goes to stderr)."""
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from benchmarks.peer_adapters import build

    def send(obj):
        reply.write(json.dumps(obj) + "\n")

    try:
        t0 = time.perf_counter()
        system = build(name, settings)
        send({"ok": True, "load_s": time.perf_counter() - t0})
        for line in sys.stdin:
            cmd = json.loads(line)["cmd"]
            t0 = time.perf_counter()
            if cmd == "step":
                out = system.step()
            elif cmd == "eval":
                out = {"scores": system.evaluate()}
            elif cmd == "info":
                out = system.info()
            elif cmd == "quit":
                system.close()
                send({"ok": True})
                return
            else:
                raise ValueError(f"unknown command {cmd!r}")
            send({"ok": True, "wall_s": time.perf_counter() - t0, **out})
    except BaseException:
        send({"ok": False, "error": traceback.format_exc()})
        raise


class Child:
    """A system's process, driven command by command."""

    def __init__(self, name: str, settings: dict, log_dir: Path):
        # OpenMP's pool as wide as torch's (torch.set_num_threads in the child)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(settings["threads"])}
        if name == "ours-mmap":
            env.update(MMAP_ENV)
        else:
            env.pop("MALLOC_MMAP_THRESHOLD_", None)
        self.name = name
        self.log = open(log_dir / f"{name}.stderr", "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", name, "--settings", json.dumps(settings)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, cwd=ROOT, env=env)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited (rc {self.proc.wait()}); see {self.log.name}")
        out = json.loads(line)
        if not out["ok"]:
            raise RuntimeError(f"{self.name} failed:\n{out['error']}")
        return out

    def ask(self, cmd: str) -> dict:
        self.proc.stdin.write(json.dumps({"cmd": cmd}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        try:
            self.ask("quit")
        finally:
            self.proc.stdin.close()
            self.proc.wait(timeout=120)
            self.log.close()


# ----------------------------------------------------------------------------- parent side


def run_group(names: list[str], settings: dict, log_dir: Path, progress=print,
              results: dict | None = None) -> dict[str, dict]:
    """Load, evaluate, train in turns and evaluate again every system of one group; what was
    measured stays in ``results`` (filled in place) when a system fails on the way."""
    results = {} if results is None else results
    results.update({n: {"steps": []} for n in names})
    evaluated = [n for n in names if settings["eval_problems"] > 0]
    children = {}
    try:
        for n in names:
            children[n] = Child(n, settings, log_dir)
            progress(f"{n}: loaded in {children[n].ready['load_s']:.1f}s")
        for n in evaluated:
            if settings.get("before_once") and n != evaluated[0]:
                # every system of the group starts from the same weights (LoRA starts as the
                # identity) and the evaluator is greedy: the first system's evaluation is theirs
                results[n]["before"] = results[evaluated[0]]["before"]
                results[n]["before_shared"] = evaluated[0]
                continue
            out = children[n].ask("eval")
            results[n]["before"] = out["scores"]
            progress(f"{n}: before {mean(out['scores']):.3f} ({out['wall_s']:.0f}s)")
        total = settings["warmup"] + settings["iterations"]
        for i in range(total):
            order = names[i % len(names):] + names[: i % len(names)]
            for n in order:
                out = children[n].ask("step")
                results[n]["steps"].append(out)
                progress(f"{n}: iteration {i + 1}/{total} {out['total_s']:.1f}s "
                         f"(generation {out['gen_s']:.1f}s, {out['tokens']:.0f} tokens)")
        for n in names:
            results[n]["info"] = children[n].ask("info")
        for n in evaluated:
            out = children[n].ask("eval")
            results[n]["after"] = out["scores"]
            progress(f"{n}: after {mean(out['scores']):.3f} ({out['wall_s']:.0f}s)")
    finally:
        for c in children.values():
            try:
                c.close()
            except Exception as exc:  # report, close the others
                progress(f"{c.name}: close failed: {exc!r}")
                c.proc.kill()
    return results


def mean(scores: dict[str, float]) -> float:
    return sum(scores.values()) / len(scores)


def summary(result: dict, warmup: int) -> dict:
    timed = result["steps"][warmup:]
    if not timed:
        raise ValueError("no timed iteration: --iterations must be >= 1")
    total = statistics.median(s["total_s"] for s in timed)
    gen = statistics.median(s["gen_s"] for s in timed)
    upd = statistics.median(s["total_s"] - s["gen_s"] for s in timed)
    tps = statistics.median(s["tokens"] / s["gen_s"] for s in timed if s["gen_s"] > 0)
    return {"s_iter": total, "gen_s": gen, "update_s": upd, "tok_s": tps,
            "tokens": statistics.median(s["tokens"] for s in timed),
            "timed": len(timed),
            "peak_mib": result.get("info", {}).get("peak_rss", float("nan")) / 2**20,
            "trainable": result.get("info", {}).get("trainable", float("nan")),
            "before": result.get("before"), "after": result.get("after")}


def fmt_score(scores) -> str:
    if not scores:
        return "n/a"
    p, n = mean(scores), len(scores)
    low, high = wilson_interval(p, n)
    return f"{p:.3f} [{low:.3f}, {high:.3f}]"


def table(summaries: dict[str, dict], settings: dict) -> str:
    head = ("system", "s/iter", "gen / update s", "gen tok/s", "peak RSS MiB", "trainable",
            "before [95% CI]", "after [95% CI]")
    rows = [head]
    for n, s in summaries.items():
        short = "" if s["timed"] == settings["iterations"] else f" ({s['timed']} timed)"
        rows.append((LABELS[n] + short, f"{s['s_iter']:.1f}", f"{s['gen_s']:.1f} / {s['update_s']:.1f}",
                     f"{s['tok_s']:.0f}", f"{s['peak_mib']:,.0f}", f"{s['trainable'] / 1e6:.2f}M",
                     fmt_score(s["before"]), fmt_score(s["after"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    once = ("; before: one evaluation per group (same starting weights)"
            if settings.get("before_once") else "")
    out = [f"model {settings['model']}, seed {settings['seed']}, median of {settings['iterations']} "
           f"iterations after {settings['warmup']} warm-up, 32 generated responses per iteration, "
           f"{settings['eval_problems']} greedy test problems{once}", *lines, ""]
    for ours, peer in PAIRS:
        if ours in summaries and peer in summaries:
            a, b = summaries[ours], summaries[peer]
            out.append(
                f"{ours} / {peer}: s/iter {a['s_iter'] / b['s_iter']:.2f}x, generation "
                f"{a['gen_s'] / b['gen_s']:.2f}x, update {a['update_s'] / b['update_s']:.2f}x, "
                f"gen tok/s {a['tok_s'] / b['tok_s']:.2f}x, peak RSS {a['peak_mib'] / b['peak_mib']:.2f}x, "
                f"trainable {a['trainable'] / b['trainable']:.2f}x")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--systems", nargs="+", default=DEFAULT_SYSTEMS, choices=list(LABELS))
    p.add_argument("--iterations", type=int, default=3, help="timed iterations per system")
    p.add_argument("--warmup", type=int, default=1, help="untimed iterations first")
    p.add_argument("--eval-problems", type=int, default=200)
    p.add_argument("--problems", type=int, default=4, help="team problems per iteration (x samples x 2)")
    p.add_argument("--seat-problems", type=int, default=8, help="seat problems per iteration (x samples)")
    p.add_argument("--samples", type=int, default=4, help="samples per problem (the group size K)")
    p.add_argument("--comlrl-full-lr", type=float, default=5e-6,
                   help="CoMLRL full fine-tune learning rate (its MAGRPOConfig default)")
    p.add_argument("--before-once", action="store_true",
                   help="evaluate the untrained model once per group (the first system) and give "
                        "that evaluation to the group's other systems, which start from the same weights")
    p.add_argument("--malloc", action="store_true", help="also time ours with MALLOC_MMAP_THRESHOLD_")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="runs/bench_peers")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--settings", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, json.loads(args.settings))
        return 0
    from benchmarks.peer_adapters import comlrl_available

    systems = list(dict.fromkeys(args.systems + (["ours-mmap"] if args.malloc else [])))
    if not comlrl_available():
        missing = [s for s in systems if s.startswith("comlrl")]
        if missing:
            print(f"skipping {' '.join(missing)}: comlrl is not installed (run `make peers`)", flush=True)
            systems = [s for s in systems if s not in missing]
    settings = {"model": args.model, "seed": args.seed, "iterations": args.iterations, "warmup": args.warmup,
                "eval_problems": args.eval_problems, "problems": args.problems,
                "seat_problems": args.seat_problems, "samples": args.samples,
                "comlrl_full_lr": args.comlrl_full_lr, "threads": args.threads,
                "before_once": args.before_once}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    failed = []
    for group in ("team", "seat", "mmap"):
        names = [s for s in systems if GROUPS[s] == group]
        if not names:
            continue
        try:
            run_group(names, settings, out, progress=lambda m: print(m, flush=True), results=results)
        except Exception as exc:  # the other group still runs; the table says what is missing
            print(f"group {group} failed: {exc}", flush=True)
            failed.extend(names)
    summaries = {n: summary(results[n], args.warmup) for n in systems
                 if n in results and len(results[n]["steps"]) > args.warmup}
    text = table(summaries, settings)
    print(text, flush=True)
    record = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "settings": settings, "results": results,
              "summaries": summaries, "table": text, "failed": failed}
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps(record) + "\n")
    if failed:
        print(f"failed: {' '.join(failed)} (logs in {out})", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
