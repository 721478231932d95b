"""End-to-end check of the generation backends on a GPU (run by benchmarks/gpu_check.sh).

    python benchmarks/gpu_check.py [--model smollm2-135m] [--env arith-3agent]
                                   [--backends transformers,vllm] [--prompts 64] [--new-tokens 128]

For each backend: one MARFT training iteration end to end (rollout with that backend, scoring,
advantages, PPO update; for vLLM followed by the adapter-only sync), then generation throughput
(tokens per second) on the same prompts. The transformers backend is the anchor. After the sync
the vLLM engine must serve the updated adapters: the check compares greedy responses of both
backends on the same prompts and prints how many agree (bf16 kernels differ, so a few may not).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from baselines.core.config import Config
from baselines.core.generation import SamplingSpec
from baselines.core.trainer import Trainer


def make_trainer(args, out: Path) -> Trainer:
    cfg = Config.from_dict(
        {
            "model": {
                "name": args.model,
                "max_new_tokens": args.new_tokens,
                "max_prompt_tokens": 1024,
            },
            "env": {"id": args.env, "num_envs": args.prompts // 2, "eval_episodes": 0},
            "train": {
                "iterations": 1,
                "episodes_per_iteration": args.prompts // 2,
                "seed": 0,
                "log": [],
                "device": "cuda" if torch.cuda.is_available() else "cpu",
            },
            "algo": {"method": "marft", "minibatch_size": 8},
        }
    )
    return Trainer(cfg, out)


def prompts_of(trainer: Trainer, n: int):
    """``n`` first-turn conversations of the training environments."""
    trainer.venv.reset(seed=123)
    batch = trainer.venv.next_batch()
    convs = list(batch.messages)
    return batch.agent, (convs * (n // len(convs) + 1))[:n]


def tokens_per_second(generator, adapter, convs, new_tokens: int) -> tuple[float, int]:
    sampling = SamplingSpec(max_new_tokens=new_tokens, temperature=1.0)
    generator.generate(adapter, convs[:2], SamplingSpec(max_new_tokens=4))  # warm-up
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = generator.generate(adapter, convs, sampling)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    tokens = sum(len(a) for a in out.action_ids)
    return tokens / (time.perf_counter() - start), tokens


def sync_effect(trainer, gen, hf, adapter: str, convs) -> tuple[int, int]:
    """Move one adapter far, sync, and count greedy responses equal to transformers' after the
    move (must be high) and to the engine's before the move (must be lower); then restore.

    A relative check: bf16 kernels of the two backends differ, so exact agreement on every
    prompt is not expected, but serving stale or wrong weights cannot win this comparison.
    """
    greedy = SamplingSpec(max_new_tokens=16, greedy=True)
    before = gen.generate(adapter, convs, greedy).action_ids
    saved = trainer.model.adapter_state(adapter)
    gen_rng = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in trainer.model.parameters(adapter):
            p.add_(torch.randn(p.shape, generator=gen_rng).to(p) * 0.5)
    gen.sync_from(trainer.model, [adapter])
    served = gen.generate(adapter, convs, greedy).action_ids
    reference = hf.generate(adapter, convs, greedy).action_ids
    trainer.model.load_adapter_state(
        adapter, {k: v.to(trainer.model.device) for k, v in saved.items()}
    )
    gen.sync_from(trainer.model, [adapter])
    agree_new = sum(a == b for a, b in zip(served, reference))
    agree_old = sum(a == b for a, b in zip(served, before))
    return agree_new, agree_old


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--env", default="arith-3agent")
    p.add_argument("--backends", default="transformers,vllm")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--out", default="/tmp/marft-gpu-check")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.35)
    args = p.parse_args()
    backends = args.backends.split(",")
    out = Path(args.out)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU (CPU)"
    print(f"device: {device}; model {args.model}; env {args.env}; torch {torch.__version__}")

    t0 = time.perf_counter()
    trainer = make_trainer(args, out / "run")
    adapter_agent, convs = prompts_of(trainer, args.prompts)
    adapter = trainer.method.policy_adapter(adapter_agent)
    print(f"trainer built in {time.perf_counter() - t0:.1f} s; adapters {trainer.policy_names}")
    rates: dict[str, float] = {}

    if "transformers" in backends:
        t = time.perf_counter()
        m = trainer.step()
        print(
            f"[transformers] MARFT iteration end to end: {time.perf_counter() - t:.1f} s, "
            f"score {m['train/score']:.3f}, generate {m['time/generate']:.1f} s"
        )
        rates["transformers"], n = tokens_per_second(
            trainer.generator, adapter, convs, args.new_tokens
        )
        print(f"[transformers] {n} tokens: {rates['transformers']:,.0f} tokens/s")

    if "vllm" in backends:
        from baselines.distributed.vllm_generator import VLLMGenerator

        t = time.perf_counter()
        hf = trainer.generator
        gen = VLLMGenerator.build(
            trainer.model,
            out / "vllm",
            adapters=trainer.policy_names,
            max_prompt_tokens=trainer.cfg.model.max_prompt_tokens,
            gpu_memory_utilization=args.gpu_memory_utilization,
            dtype="bfloat16" if torch.cuda.is_available() else "float32",
        )
        print(f"[vllm] engine up in {time.perf_counter() - t:.1f} s")
        trainer.generator = gen  # the generator choice (see docs/distributed.md)
        t = time.perf_counter()
        m = trainer.step()
        t_sync = time.perf_counter()
        gen.sync_from(trainer.model, trainer.policy_names)  # adapter-only weight sync
        t_sync = time.perf_counter() - t_sync
        print(
            f"[vllm] MARFT iteration end to end: {time.perf_counter() - t:.1f} s, score "
            f"{m['train/score']:.3f}, generate {m['time/generate']:.1f} s; adapter sync {t_sync:.2f} s "
            f"(version {gen.version})"
        )
        agree_new, agree_old = sync_effect(trainer, gen, hf, adapter, convs[:16])
        print(
            f"[vllm] sync check: after moving adapter {adapter!r} and syncing, vLLM's greedy "
            f"responses match transformers' on {agree_new}/16 prompts (the stale weights' "
            f"responses on {agree_old}/16)"
        )
        if agree_new <= agree_old:
            print("GPU CHECK FAILED: vLLM does not serve the synced adapter weights")
            return 1
        rates["vllm"], n = tokens_per_second(gen, adapter, convs, args.new_tokens)
        print(f"[vllm] {n} tokens: {rates['vllm']:,.0f} tokens/s")

    if "transformers" in rates and "vllm" in rates:
        print(
            f"tokens/s: transformers {rates['transformers']:,.0f} (anchor), vllm {rates['vllm']:,.0f}, "
            f"ratio {rates['vllm'] / rates['transformers']:.2f}x"
        )
    print("GPU CHECK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
