"""Peak memory of a 4-agent MARFT training step vs a 1-agent step on the same base model.

    python benchmarks/bench_memory.py [--model smollm2-135m]

Each configuration runs in its own process (peak RSS on CPU, peak CUDA memory on a GPU) and
does one full iteration: rollout, scoring, PPO update of every agent's adapter and the critic.
MARFT here keeps ONE base model with 4 + 1 LoRA adapters; the MARFT reference code keeps one
full model per agent plus one for the critic, estimated below from the parameter bytes.
Target: ratio <= 1.2.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def child(model: str, agents: int, out: str) -> None:
    import torch

    import marft_envs
    from baselines.core.config import load_config
    from baselines.core.trainer import Trainer
    from marft_envs import Role, Workflow

    torch.set_num_threads(2)
    roles = tuple(Role(f"agent{i}", f"You are solver {i}. Answer briefly.") for i in range(agents))
    env_id = f"bench-mem-{agents}agent"
    marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", kwargs={
        "dataset": "arith", "workflow": Workflow(f"bench-{agents}", roles), "verifier": "math"})
    cfg = load_config("marft", overrides=[
        f"env.id={env_id}", f"model.name={model}", "model.max_new_tokens=16", "env.num_envs=4",
        "train.episodes_per_iteration=4", "algo.minibatch_size=4", "train.log=[]"])
    trainer = Trainer(cfg, out)
    cuda = torch.cuda.is_available()
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.step()
    params = sum(p.numel() * p.element_size() for p in trainer.model.peft.get_base_model().parameters())
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"peak": peak, "loaded": loaded * 1024, "params": params, "cuda": cuda}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--out", default="runs/bench_memory")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.model, args.child, args.out)
        return
    results = {}
    for agents in (1, 4):
        done = subprocess.run([sys.executable, __file__, "--model", args.model, "--out", args.out,
                               "--child", str(agents)], check=False, capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(done.stderr[-3000:])
        results[agents] = json.loads(done.stdout.strip().splitlines()[-1])
    one, four = results[1], results[4]
    mib = 1024 ** 2
    kind = "peak CUDA memory" if one["cuda"] else "peak RSS"
    print(f"model {args.model}: base parameters {one['params'] / mib:.0f} MiB")
    print(f"1-agent MARFT step: {kind} {one['peak'] / mib:.0f} MiB")
    print(f"4-agent MARFT step: {kind} {four['peak'] / mib:.0f} MiB")
    print(f"ratio 4-agent / 1-agent: {four['peak'] / one['peak']:.3f} (target <= 1.2)")
    ref = four["peak"] + 4 * one["params"]  # + 3 more agent copies and a critic copy
    print(f"reference-code layout (a full model per agent + one for the critic), estimated: "
          f"{ref / mib:.0f} MiB, ratio {ref / one['peak']:.3f}")


if __name__ == "__main__":
    main()
