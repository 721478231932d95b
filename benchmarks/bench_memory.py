"""Peak memory of a 4-agent MARFT training step vs a 1-agent step on the same base model.

    python benchmarks/bench_memory.py [--model smollm2-135m] [--prompt-tokens 192] [--new-tokens 16]

Each configuration runs in its own process (peak RSS on CPU, peak CUDA memory on a GPU) and
does one full iteration: rollout, scoring, PPO update of every agent's adapter and the critic.
MARFT here keeps ONE base model with 4 + 1 LoRA adapters; the MARFT reference code keeps one
full model per agent plus one for the critic, estimated below from the parameter bytes.
Target: ratio <= 1.2.

Fair comparison: what is measured is the cost of more agents (adapters, their optimiser
states, one critic over more roles), not of more data. Both steps train on the same number of
sequences of the same shape: the 1-agent step plays 4x the episodes (one turn each), so both
have ``4 * episodes`` turns, and every played turn's prompt and response are replaced, after
the rollout, by ``--prompt-tokens`` and ``--new-tokens`` fixed random token ids (the
environment's rewards and verdicts are kept), as is the state the centralised critic reads.
So every scoring pass and every optimiser step sees equal sequences and tokens in both runs.

On CPU the children run with ``MALLOC_MMAP_THRESHOLD_=65536``: glibc then serves every large
tensor from its own mapping and returns it on free, so peak RSS tracks the live tensors instead
of the heap's fragmentation high-water mark (which otherwise varies by hundreds of MiB with the
order of allocations, not with the number of agents).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


EPISODES = 4  # episodes of the 4-agent step; the 1-agent step plays 4x as many


def fixed_shape(collect, prompt_tokens: int, new_tokens: int, vocab: int):
    """``collect`` whose turns all carry ``prompt_tokens`` + ``new_tokens`` fixed token ids."""
    import torch

    def wrapped(*args, **kwargs):
        rollout = collect(*args, **kwargs)
        g = torch.Generator().manual_seed(0)
        for t in rollout.flat():
            low = min(100, vocab // 2)  # past the special tokens
            t.prompt_ids = torch.randint(low, vocab, (prompt_tokens,), generator=g).tolist()
            t.action_ids = torch.randint(low, vocab, (new_tokens,), generator=g).tolist()
            t.state = "the same shared state for every turn " * 8
        return rollout

    return wrapped


def child(model: str, agents: int, out: str, prompt_tokens: int, new_tokens: int,
          episodes: int = EPISODES) -> None:
    import torch

    import marft_envs
    from baselines.core import sources as sources_module
    from baselines.core.config import load_config
    from baselines.trainer import Trainer
    from marft_envs import Role, Workflow

    torch.set_num_threads(2)
    roles = tuple(Role(f"agent{i}", f"You are solver {i}. Answer briefly.") for i in range(agents))
    env_id = f"bench-mem-{agents}agent"
    marft_envs.register(env_id, "marft_envs.flexmg:FlexMGEnv", kwargs={
        "dataset": "arith", "workflow": Workflow(f"bench-{agents}", roles), "verifier": "math"})
    cfg = load_config("marft", overrides=[
        f"env.id={env_id}", f"model.name={model}", f"model.max_new_tokens={new_tokens}", "env.num_envs=4",
        f"train.episodes_per_iteration={episodes * 4 // agents}", "algo.minibatch_size=4", "train.log=[]"])
    trainer = Trainer(cfg, out)
    turns = []

    def counted(*args, **kwargs):
        rollout = shaped(*args, **kwargs)
        turns.append(len(rollout.flat()))
        return rollout

    vocab = trainer.model.peft.get_base_model().config.vocab_size  # a char tokenizer is shorter
    shaped = fixed_shape(sources_module.collect, prompt_tokens, new_tokens, min(vocab, 30000))
    sources_module.collect = counted  # what the episode source plays with
    cuda = torch.cuda.is_available()
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.step()
    optimised = {id(p): p for opt in trainer.optimizers.values() for g in opt.param_groups for p in g["params"]}
    trainable = sum(p.numel() * p.element_size() for p in optimised.values())
    params = sum(p.numel() * p.element_size() for p in trainer.model.peft.get_base_model().parameters()
                 if id(p) not in optimised)
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"peak": peak, "loaded": loaded * 1024, "params": params, "trainable": trainable, "cuda": cuda,
                      "turns": turns[0], "adapters": len(trainer.model.adapters)}))


def measure(model: str, agents: int, out: str, prompt_tokens: int, new_tokens: int,
            episodes: int = EPISODES) -> dict:
    """One MARFT step with ``agents`` agents in a fresh process: its peak memory and sizes
    (``episodes``: episodes of the 4-agent step, ``4 * episodes`` turns in both)."""
    done = subprocess.run([sys.executable, __file__, "--model", model, "--out", out,
                           "--prompt-tokens", str(prompt_tokens), "--new-tokens", str(new_tokens),
                           "--episodes", str(episodes), "--child", str(agents)], check=False, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--out", default="runs/bench_memory")
    p.add_argument("--prompt-tokens", type=int, default=192, help="prompt tokens of every trained turn")
    p.add_argument("--new-tokens", type=int, default=16, help="response tokens of every trained turn")
    p.add_argument("--episodes", type=int, default=EPISODES,
                   help="episodes of the 4-agent step (the 1-agent step plays 4x as many)")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.model, args.child, args.out, args.prompt_tokens, args.new_tokens, args.episodes)
        return
    results = {agents: measure(args.model, agents, args.out, args.prompt_tokens, args.new_tokens,
                               args.episodes)
               for agents in (1, 4)}
    one, four = results[1], results[4]
    mib = 1024 ** 2
    kind = "peak CUDA memory" if one["cuda"] else "peak RSS"
    if one["turns"] != four["turns"]:
        raise SystemExit(f"unfair comparison: {one['turns']} trained turns (1 agent) vs {four['turns']} (4 agents)")
    print(f"model {args.model}: base parameters {one['params'] / mib:.0f} MiB")
    print(f"both steps: {one['turns']} trained sequences of {args.prompt_tokens} prompt + {args.new_tokens} "
          f"response tokens, minibatch 4; LoRA adapters (policies + critic): 1-agent {one['adapters']}, "
          f"4-agent {four['adapters']}")
    print(f"trainable parameters (LoRA adapters + value heads): 1-agent {one['trainable'] / mib:.1f} MiB, "
          f"4-agent {four['trainable'] / mib:.1f} MiB (AdamW adds 2x that in optimiser state)")
    print(f"1-agent MARFT step: {kind} {one['peak'] / mib:.0f} MiB")
    print(f"4-agent MARFT step: {kind} {four['peak'] / mib:.0f} MiB")
    print(f"ratio 4-agent / 1-agent: {four['peak'] / one['peak']:.3f} (target <= 1.2)")
    ref = four["peak"] + 4 * one["params"]  # + 3 more agent copies and a critic copy
    print(f"reference-code layout (a full model per agent + one for the critic), estimated: "
          f"{ref / mib:.0f} MiB, ratio {ref / one['peak']:.3f}")


if __name__ == "__main__":
    main()
