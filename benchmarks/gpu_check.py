"""GPU check of the baselines' GPU path, offline, in a few minutes (run by benchmarks/gpu_check.sh).

    python benchmarks/gpu_check.py [--device auto|cuda|cpu] [--model random-qwen2-0.5b]
                                   [--dtype bfloat16] [--prompts 64] [--new-tokens 128] ...

Needs no network and no model download: the default model is ``random-qwen2-0.5b`` (Qwen2-0.5B's
shape, random weights, built on the device); ``--model tiny-random`` is the CPU smoke size
(``--device cpu --model tiny-random`` runs in CI with smaller sizes, see
tests/baselines/test_gpu_check.py). Prints:

1. generation tokens/s of the transformers backend (``HFGenerator``, one adapter);
2. log-prob agreement between the rollout (what ``generate`` sampled with) and the training
   forward (``AdapterModel.action_logprobs``) on those tokens, in ``--dtype`` and in float32;
3. PPO update time per token (forward, backward and AdamW step of one adapter on fixed-shape
   sequences, the trainer's loss) and its model-FLOPs utilisation: FLOPs counted as
   ``4 N T`` for the layers (forward + backward of the activations through the frozen base; the
   LoRA weight gradients are negligible), ``12 L T^2 H`` for attention, and ``6 H V`` per
   response token for the output projection (forward, backward, recomputation), divided by the
   time and by the device's peak: the published dense bf16 peak for known GPUs, and always the
   measured peak of a large matmul in the same dtype;
4. peak memory of a 1-agent and a 4-agent MARFT step (benchmarks/bench_memory.py, each in its
   own process; peak CUDA memory on a GPU, peak RSS on CPU) and their ratio (target <= 1.2);
5. vLLM: one MARFT iteration with the vLLM backend and its adapter sync when vLLM is installed;
   otherwise one line saying it was skipped.

Exit status 0 and "GPU CHECK PASSED" when every figure was measured and is finite.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch

from baselines.core import algos
from baselines.core.generation import HFGenerator, SamplingSpec
from baselines.core.models import AdapterModel, LoraSpec, load_base, pack_sequences

# Published dense (no sparsity) bf16 tensor-core peaks, TFLOP/s; longest name matched first.
PEAK_BF16_TFLOPS = {
    "H100 PCIe": 756,
    "H100": 989,
    "H200": 989,
    "GH200": 989,
    "B200": 2250,
    "A100": 312,
    "L40S": 362,
    "L4": 121,
    "A10G": 70,
    "A10": 125,
}
CPU_DEFAULTS = {
    "prompts": 4,
    "new_tokens": 8,
    "update_seqs": 4,
    "update_prompt_tokens": 24,
    "update_new_tokens": 8,
    "update_steps": 2,
    "memory_prompt_tokens": 32,
    "memory_new_tokens": 8,
    "memory_episodes": 4,
    "matmul_size": 1024,
}
GPU_DEFAULTS = {
    "prompts": 64,
    "new_tokens": 128,
    "update_seqs": 16,
    "update_prompt_tokens": 256,
    "update_new_tokens": 128,
    "update_steps": 5,
    "memory_prompt_tokens": 192,
    "memory_new_tokens": 16,
    "memory_episodes": 4,
    "matmul_size": 8192,
}


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def conversations(n: int) -> list[list[dict]]:
    return [
        [{"role": "user", "content": f"What is {7 * i + 3} + {11 * i + 5}? Answer briefly."}]
        for i in range(n)
    ]


def adapter_model(name: str, dtype: str, device: str) -> AdapterModel:
    base, tok = load_base(name, dtype=dtype, device=device)
    return AdapterModel(base, tok, ["agent0"], LoraSpec(r=16, alpha=32))


def generation(am: AdapterModel, prompts: int, new_tokens: int, device: str):
    """Tokens/s of one batched ``generate`` of ``prompts`` conversations, and that generation."""
    gen = HFGenerator(am, batch_size=prompts)
    convs = conversations(prompts)
    gen.generate("agent0", convs[:2], SamplingSpec(max_new_tokens=4))  # warm-up
    sync(device)
    start = time.perf_counter()
    out = gen.generate("agent0", convs, SamplingSpec(max_new_tokens=new_tokens))
    sync(device)
    tokens = sum(len(a) for a in out.action_ids)
    return tokens / (time.perf_counter() - start), out


def agreement(am: AdapterModel, out) -> tuple[float, float, int]:
    """Mean and max |rollout - training| log-prob over the generated tokens, and their count."""
    batch = pack_sequences(out.prompt_ids, out.action_ids, am.tokenizer.pad_token_id).to(am.device)
    with torch.no_grad(), am.using("agent0"):
        train, _ = am.action_logprobs(batch)
    rollout = torch.zeros_like(train)
    for b, row in enumerate(out.logprobs):
        rollout[b, : len(row)] = torch.tensor(row, device=train.device)
    mean, peak = algos.logprob_mismatch(rollout, train, batch.mask)
    return float(mean), float(peak), int(batch.mask.sum())


@contextlib.contextmanager
def in_float32(module: torch.nn.Module):
    """``module`` in float32 inside the block, every parameter and buffer back in its own dtype
    after it: the bf16 base round-trips exactly, and the LoRA weights that peft keeps in float32
    on a bf16 base stay float32 (``module.to(bfloat16)`` would cast them too, and the PPO update
    measured next would train bf16 adapters, which the trainer never does)."""
    dtypes = {n: t.dtype for n, t in (*module.named_parameters(), *module.named_buffers())}
    module.to(torch.float32)
    try:
        yield module
    finally:
        for name, t in (*module.named_parameters(), *module.named_buffers()):
            if t.dtype != dtypes[name]:
                t.data = t.data.to(dtypes[name])


def update_flops(am: AdapterModel, seqs: int, prompt_tokens: int, new_tokens: int) -> float:
    """Model FLOPs of one PPO update step on ``seqs`` sequences (see the module docstring)."""
    config = am.peft.get_base_model().config
    h, layers, vocab = config.hidden_size, config.num_hidden_layers, config.vocab_size
    embedding = am.peft.get_base_model().get_input_embeddings().weight.numel()
    base = sum(p.numel() for n, p in am.peft.named_parameters() if "lora_" not in n) - embedding
    t = prompt_tokens + new_tokens
    return seqs * (4 * base * t + 12 * layers * t * t * h + 6 * h * vocab * new_tokens)


def ppo_update(am, seqs: int, prompt_tokens: int, new_tokens: int, steps: int, device: str):
    """Seconds per step of the trainer's PPO policy update on fixed-shape random sequences."""
    vocab = am.peft.get_base_model().config.vocab_size
    g = torch.Generator().manual_seed(0)
    low = min(100, vocab // 2)
    prompts = torch.randint(low, vocab, (seqs, prompt_tokens), generator=g).tolist()
    actions = torch.randint(low, vocab, (seqs, new_tokens), generator=g).tolist()
    batch = pack_sequences(prompts, actions, am.tokenizer.pad_token_id).to(am.device)
    advantages = torch.randn(batch.mask.shape, generator=g).to(am.device)
    opt = torch.optim.AdamW(am.parameters("agent0"), lr=1e-5)
    am.peft.train()
    with torch.no_grad(), am.using("agent0"):
        old, _ = am.action_logprobs(batch)

    def step():
        with am.using("agent0"):
            logp, _ = am.action_logprobs(batch)
        loss, _ = algos.ppo_policy_loss(logp, old, advantages, batch.mask, 0.2)
        algos.check_finite("PPO loss", loss.detach())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # warm-up (allocator, kernels)
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    am.peft.eval()
    return (time.perf_counter() - start) / steps


def matmul_peak(device: str, dtype: torch.dtype, n: int) -> float:
    """Measured FLOP/s of an ``n x n`` matmul in ``dtype`` (the achievable peak here)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    a @ b  # warm-up
    sync(device)
    reps = 20 if device.startswith("cuda") else 3
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - start)


def published_peak(device: str) -> tuple[str, float] | None:
    if not device.startswith("cuda"):
        return None
    name = torch.cuda.get_device_name(torch.device(device))
    for key in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if key in name:
            return name, PEAK_BF16_TFLOPS[key] * 1e12
    return None


def vllm_check(args, device: str) -> list[float]:
    """One MARFT iteration with the vLLM backend, then the adapter sync; [tokens/s]."""
    from baselines.core.config import Config
    from baselines.trainer import Trainer
    from baselines.distributed.vllm_generator import VLLMGenerator

    cfg = Config.from_dict(
        {
            "model": {"name": args.model, "max_new_tokens": 32, "dtype": args.dtype},
            "env": {"id": "arith-3agent", "num_envs": 8, "eval_episodes": 0},
            "train": {"iterations": 1, "episodes_per_iteration": 8, "log": [], "device": device},
            "algo": {"method": "marft", "minibatch_size": 8},
        }
    )
    trainer = Trainer(cfg, Path(args.out) / "vllm-run")
    t = time.perf_counter()
    gen = VLLMGenerator.build(
        trainer.model,
        Path(args.out) / "vllm",
        adapters=trainer.policy_names,
        max_prompt_tokens=cfg.model.max_prompt_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        dtype=args.dtype,
    )
    print(f"[vllm] engine up in {time.perf_counter() - t:.1f} s")
    trainer.generator = gen
    t = time.perf_counter()
    m = trainer.step()  # the trainer syncs the adapters after the update
    print(
        f"[vllm] MARFT iteration end to end {time.perf_counter() - t:.1f} s (generate "
        f"{m['time/generate']:.1f} s, adapter sync included), version {gen.version}; "
        f"rollout/training log-prob mismatch mean {m['train/logprob_mismatch']:.4f}, "
        f"max {m['train/logprob_mismatch_max']:.4f}"
    )
    convs = conversations(args.prompts)
    sync(device)
    t = time.perf_counter()
    out = gen.generate(trainer.policy_names[0], convs, SamplingSpec(max_new_tokens=args.new_tokens))
    rate = sum(len(a) for a in out.action_ids) / (time.perf_counter() - t)
    print(f"[vllm] generation: {rate:,.0f} tokens/s")
    return [rate, m["train/logprob_mismatch"]]


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--device", default="auto", help="auto, cuda, cuda:N or cpu")
    p.add_argument("--model", default="random-qwen2-0.5b")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    for key, gpu_default in GPU_DEFAULTS.items():
        p.add_argument(
            "--" + key.replace("_", "-"),
            type=int,
            default=None,
            help=f"default {gpu_default} on a GPU, {CPU_DEFAULTS[key]} on CPU",
        )
    p.add_argument("--out", default="/tmp/marft-gpu-check")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    args = p.parse_args()
    device = (
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {device}: CUDA is not available here; use --device cpu")
    defaults = GPU_DEFAULTS if device.startswith("cuda") else CPU_DEFAULTS
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    import peft
    import transformers

    name = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else "CPU"
    print(
        f"device {device} ({name}); torch {torch.__version__}, transformers "
        f"{transformers.__version__}, peft {peft.__version__}; model {args.model}, {args.dtype}"
    )
    figures: list[float] = []
    t0 = time.perf_counter()

    am = adapter_model(args.model, args.dtype, device)
    params = sum(p.numel() for p in am.peft.get_base_model().parameters())
    print(
        f"model built on {device} in {time.perf_counter() - t0:.1f} s: "
        f"{params / 1e6:.1f}M parameters"
    )

    rate, out = generation(am, args.prompts, args.new_tokens, device)
    n_tokens = sum(len(a) for a in out.action_ids)
    print(
        f"[transformers] generation: {args.prompts} prompts x up to {args.new_tokens} new tokens, "
        f"{n_tokens} tokens: {rate:,.0f} tokens/s"
    )
    mean, peak, n = agreement(am, out)
    print(
        f"log-prob agreement, rollout vs training forward, {args.dtype}: mean |diff| {mean:.5f}, "
        f"max {peak:.5f} over {n} tokens"
    )
    figures += [rate, mean, peak]
    print(f"(at {time.perf_counter() - t0:.0f} s)")
    if args.dtype != "float32":
        with in_float32(am.peft):
            _, out32 = generation(am, args.prompts, args.new_tokens, device)
            mean32, peak32, n32 = agreement(am, out32)
        print(
            f"log-prob agreement, rollout vs training forward, float32 (anchor): mean |diff| "
            f"{mean32:.6f}, max {peak32:.6f} over {n32} tokens"
        )
        figures += [mean32, peak32]

    per_step = ppo_update(
        am,
        args.update_seqs,
        args.update_prompt_tokens,
        args.update_new_tokens,
        args.update_steps,
        device,
    )
    tokens = args.update_seqs * (args.update_prompt_tokens + args.update_new_tokens)
    flops = update_flops(am, args.update_seqs, args.update_prompt_tokens, args.update_new_tokens)
    measured = matmul_peak(device, getattr(torch, args.dtype), args.matmul_size)
    line = (
        f"PPO update: {args.update_seqs} sequences x ({args.update_prompt_tokens} + "
        f"{args.update_new_tokens}) tokens, {per_step * 1e3:.1f} ms per step = "
        f"{per_step / tokens * 1e6:.3g} us per token; {flops / per_step / 1e12:.3g} TFLOP/s = "
        # three significant digits, not one decimal: a tiny model on a loaded CPU is < 0.05%
        f"MFU {100 * flops / per_step / measured:.3g}% of the measured {args.dtype} matmul peak "
        f"({measured / 1e12:.3g} TFLOP/s)"
    )
    known = published_peak(device)
    if known is not None:
        line += (
            f", {flops / per_step / known[1]:.1%} of the {known[0]}'s published dense bf16 peak "
            f"({known[1] / 1e12:.0f} TFLOP/s)"
        )
    print(line)
    print(f"(at {time.perf_counter() - t0:.0f} s)")
    figures += [per_step, flops / per_step / measured]
    del am, out
    if device.startswith("cuda"):
        torch.cuda.empty_cache()

    from bench_memory import measure

    mem = {
        a: measure(
            args.model,
            a,
            str(Path(args.out) / "memory"),
            args.memory_prompt_tokens,
            args.memory_new_tokens,
            args.memory_episodes,
        )
        for a in (1, 4)
    }
    if mem[1]["turns"] != mem[4]["turns"]:
        raise SystemExit(
            f"unfair memory comparison: {mem[1]['turns']} trained turns (1 agent) vs "
            f"{mem[4]['turns']} (4 agents)"
        )
    kind = "peak GPU memory" if mem[1]["cuda"] else "peak RSS (CPU)"
    ratio = mem[4]["peak"] / mem[1]["peak"]
    print(
        f"MARFT step, {mem[1]['turns']} sequences of {args.memory_prompt_tokens} + "
        f"{args.memory_new_tokens} tokens: 1-agent {kind} {mem[1]['peak'] / 2**20:.0f} MiB, "
        f"4-agent {mem[4]['peak'] / 2**20:.0f} MiB, ratio {ratio:.3f} (target <= 1.2: "
        f"{'met' if ratio <= 1.2 else 'MISSED'})"
    )
    figures.append(ratio)
    print(f"(at {time.perf_counter() - t0:.0f} s)")

    if importlib.util.find_spec("vllm") is None:
        print("vLLM: not installed here, its check is skipped (pip install 'marft-envs[vllm]')")
    else:
        figures += vllm_check(args, device)
    print(f"total {time.perf_counter() - t0:.0f} s")
    bad = [f for f in figures if not math.isfinite(f)]
    if bad:
        print(f"GPU CHECK FAILED: {len(bad)} figure(s) not finite")
        return 1
    print("GPU CHECK PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
