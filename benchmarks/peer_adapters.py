"""The systems of ``bench_peers.py``: ours, CoMLRL 1.4.3 and TRL's GRPOTrainer behind one
interface (``load``, ``step``, ``evaluate``, ``info``), and the adaptations CoMLRL needs to run
a Flex-MG team at all.

Every system is evaluated by the project's own evaluator (``baselines.core.evaluator``): the same
``(seed, task)`` plan, the same chat-template rendering, greedy decoding with the same stop ids
and the same 32-wide batches; a peer's models are handed to it through :class:`PlainGenerator`
(the ``HFGenerator`` code path without adapters), so an evaluation differs only in the weights.

CoMLRL adaptations (each needed to run ``arith0-2agent`` with ``comlrl==1.4.3``; see
docs/performance.md):

1. ``wandb`` stub. ``comlrl.trainers.reinforce.magrpo`` imports ``wandb`` unconditionally (it is
   a hard requirement of the wheel); without it, importing the trainer fails. :func:`import_comlrl`
   puts an inert module in ``sys.modules`` when wandb is not installed (no ``wandb_config`` is
   passed, so CoMLRL never calls it).
2. A pad token distinct from EOS. CoMLRL's ``ensure_pad_token`` makes the pad token the EOS when a
   tokenizer has none, and ``_generate_completions`` takes the prompt's length as the position of
   its first pad token: SmolLM2's pad token *is* its EOS, ``<|im_end|>``, which every chat prompt
   contains, so the "prompt" ends inside the system message, the "completion" starts with that
   ``<|im_end|>`` and decodes to the empty string -- every reward is 0 and nothing is learnt,
   silently. CoMLRL's tokenizer copy gets ``<|endoftext|>`` (a token no prompt contains) as pad.
3. The hand-off. CoMLRL's agents of one turn act in parallel on the same prompt; in a Flex-MG
   chain the answerer reads the solver's reply. :class:`HandOffMAGRPO` generates the answerer's
   ``K`` replies from ``K`` prompts (the ``j``-th holds the solver's ``j``-th reply: CoMLRL's
   ``aligned`` joint action), batched in one ``generate`` call with CoMLRL's own sampling
   arguments, and computes CoMLRL's loss (its ``_compute_loss_with_gradients``, unchanged in
   form) with each reply's own prompt.
4. The reward signature. ``comlrl.utils.reward_utils.call_reward_function`` dispatches on the
   number of positional-or-keyword parameters: ``reward(completions_1, completions_2,
   batch_items=None)`` counts as ``num_agents + 1`` parameters, so it is called as
   ``reward(prompts, completions_1, completions_2, batch_items=...)`` and raises "got multiple
   values for argument 'batch_items'". :func:`handoff_reward` makes ``batch_items``
   keyword-only: ``reward(solver_completions, answerer_completions, *, batch_items=None)``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import queue
import resource
import sys
import tempfile
import threading
import time
import types
from pathlib import Path
from typing import Any

import torch

import marft_envs
from baselines.core.config import load_config
from baselines.core.evaluator import Evaluator
from baselines.core.generation import (
    Generation,
    SamplingSpec,
    generation_config,
    left_pad,
    only_given_config,
    render_prompts,
)
from baselines.core.models import load_base
from baselines.demo import RECIPE
from baselines.distributed.groups import make_worker_group
from baselines.methods import equal_compute_overrides, preset_of
from baselines.trainer import Trainer, env_overrides

ROOT = Path(__file__).resolve().parent.parent
#: Where ``make peers`` installs the peers (``pip install --target``), outside the venv.
PEERS_DIR = ROOT / ".cache" / "bench-peers"
COMLRL_VERSION = "1.4.3"

TEAM_ENV = "arith0-2agent"
SEAT = "solver_0"  # the seat trained alone; the answerer echoes it
SEAT_ENV = "bench-arith0-solver"  # the solver's role alone: the same prompt, graded directly


def register_seat_env() -> str:
    """A one-agent Flex-MG env with ``arith0-2agent``'s solver role alone: the solver's prompt is
    the same text as in the duo (position 0 sees no teammate), and its reply is graded directly,
    which is what the duo grades when the answerer echoes the solver (``others="echo"``)."""
    if SEAT_ENV not in marft_envs.registry:
        team = marft_envs.make(TEAM_ENV)
        workflow, kwargs = team.unwrapped.workflow, dict(marft_envs.spec(TEAM_ENV).kwargs)
        team.close()
        solo = dataclasses.replace(workflow, name=f"{workflow.name}-solver", roles=workflow.roles[:1],
                                   dependency=None, answerer=-1)
        marft_envs.register(SEAT_ENV, "marft_envs.flexmg:FlexMGEnv", kwargs={**kwargs, "workflow": solo})
    return SEAT_ENV


def peak_rss() -> int:
    """This process's peak resident set size in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def trainable(params) -> int:
    return sum(p.numel() for p in params if p.requires_grad)


# ------------------------------------------------------------------------------- evaluation


class PlainGenerator:
    """:class:`~baselines.core.generation.HFGenerator`'s generation for plain transformers models,
    one per adapter name (here: per agent id), no adapters to switch."""

    def __init__(self, models: dict[str, Any], tokenizer, batch_size: int = 32):
        self.models, self.tokenizer, self.batch_size = models, tokenizer, batch_size
        first = next(iter(models.values()))
        extra = first.generation_config.eos_token_id
        ids = {tokenizer.eos_token_id} | (set(extra) if isinstance(extra, (list, tuple)) else {extra})
        self.stop_ids = sorted(i for i in ids if i is not None)

    @torch.no_grad()
    def generate(self, adapter, conversations, sampling: SamplingSpec) -> Generation:
        prompts = render_prompts(self.tokenizer, conversations)
        result = Generation([], [], [], [], [])
        model = self.models[adapter]
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        stops = set(self.stop_ids)
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(prompts), self.batch_size):
            chunk = prompts[start : start + self.batch_size]
            ids, mask = left_pad(chunk, pad)
            was_training = model.training
            model.eval()
            try:
                with only_given_config(base):
                    out = model.generate(
                        input_ids=ids, attention_mask=mask,
                        generation_config=generation_config(sampling, pad, self.stop_ids),
                    )
            finally:
                model.train(was_training)
            for prompt, row in zip(chunk, out[:, ids.shape[1] :].tolist(), strict=True):
                cut = next((i for i, tok in enumerate(row) if tok in stops), None)
                action = row if cut is None else row[: cut + 1]
                result.prompt_ids.append(list(prompt))
                result.action_ids.append(action)
                result.texts.append(self.tokenizer.decode(action, skip_special_tokens=True))
                result.truncated.append(cut is None)
                result.logprobs.append([])
        return result


class _Modules(torch.nn.ModuleList):
    """A peer's models as :class:`Evaluator` takes them (put in eval mode while playing): one
    module, whose ``.peft`` is itself for an evaluator that expects an adapter model's."""

    @property
    def peft(self):
        return self


def peer_evaluator(cfg, models: dict[str, Any]) -> Evaluator:
    """The project's evaluator over a peer's models (agent id -> model)."""
    def make_envs(env_id, seed, overrides, num_envs):
        return make_worker_group("inprocess", env_id, num_envs, num_workers=1, seed=seed, **overrides)

    return Evaluator(cfg, _Modules(list(models.values())), lambda agent: agent,
                     env_overrides(cfg, for_eval=True), make_envs, "cpu")


def scores(episodes) -> dict[str, float]:
    return {e.task_id: e.score for e in episodes}


# ------------------------------------------------------------------------------- settings


def our_config(settings: dict):
    """Our recipe (``baselines.demo.RECIPE``: LoRA r=8, lr 3e-4, PPO-clip, 2 epochs, 12 new tokens,
    temperature 0.7) run as MAGRPO with ``problems`` x ``samples`` episodes per iteration."""
    env_id = settings["env"]
    env = marft_envs.make(env_id)
    agents = len(env.possible_agents)
    env.close()
    episodes = settings["problems"] * settings["samples"]
    overrides = [
        *RECIPE,
        f"env.id={env_id}",
        f"model.name={settings['model']}",
        f"train.seed={settings['seed']}",
        f"env.eval_episodes={settings['eval_problems']}",
        "env.eval_num_envs=32",
        "train.log=[]",
        "algo.method=magrpo",
        *equal_compute_overrides("magrpo", episodes, agents, settings["samples"]),
    ]
    return load_config(preset_of("magrpo"), overrides=overrides)


def train_seeds(settings: dict, iteration: int) -> list[int]:
    """The peers' training problems of an iteration: episode seeds on the train split (ours draws
    its own from ``Trainer.data_seed``: the same distribution, not the same problems)."""
    n = settings["problems"]
    return [settings["seed"] * 1_000_000 + iteration * n + i for i in range(n)]


# ------------------------------------------------------------------------------- ours


class Ours:
    """Our trainer: ``Trainer.step()`` per iteration, ``Trainer.play_eval`` to evaluate."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.tmp = tempfile.TemporaryDirectory()
        self.trainer = Trainer(our_config(settings), Path(self.tmp.name))

    def step(self) -> dict:
        m = self.trainer.step()
        return {"total_s": m["time/iteration"], "gen_s": m["time/generate"],
                "tokens": m.get("train/generated_tokens", 0.0), "score": m.get("train/score")}

    def evaluate(self) -> dict[str, float]:
        return scores(self.trainer.play_eval(self.settings["eval_problems"]))

    def info(self) -> dict:
        opt = {id(p): p for o in self.trainer.optimizers.values() for g in o.param_groups for p in g["params"]}
        return {"trainable": sum(p.numel() for p in opt.values()), "peak_rss": peak_rss()}

    def close(self) -> None:
        self.trainer.close()
        self.tmp.cleanup()


# ------------------------------------------------------------------------------- CoMLRL


def import_comlrl():
    """``comlrl`` from ``make peers``'s folder (appended to ``sys.path``: it never shadows the
    venv), with adaptation 1 (a wandb stub) when wandb is absent. None when it is not installed."""
    if PEERS_DIR.is_dir() and str(PEERS_DIR) not in sys.path:
        sys.path.append(str(PEERS_DIR))
    if importlib.util.find_spec("comlrl") is None:
        return None
    import transformers  # noqa: F401 (imported before the stub: accelerate probes for wandb)
    import transformers.trainer  # noqa: F401

    stubbed = importlib.util.find_spec("wandb") is None and "wandb" not in sys.modules
    if stubbed:
        stub = types.ModuleType("wandb")
        stub.run = None  # CoMLRL logs only `if self.wandb_initialized and wandb.run is not None`

        def unavailable(*args, **kwargs):
            raise RuntimeError("wandb is a stub here (bench_peers): pass no wandb_config")

        stub.init = stub.log = stub.finish = unavailable
        sys.modules["wandb"] = stub
    try:
        import comlrl
        from comlrl.trainers.reinforce import magrpo
    finally:
        if stubbed:  # CoMLRL's modules keep their reference; nothing else may see a wandb
            del sys.modules["wandb"]
    if comlrl.__version__ != COMLRL_VERSION:
        raise RuntimeError(f"bench_peers is written against comlrl {COMLRL_VERSION}, found "
                           f"{comlrl.__version__}: run `make peers`")
    return magrpo


def comlrl_available() -> bool:
    return import_comlrl() is not None


def _seat_env(settings, seed: int, solver_text: str | None = None):
    """The answerer's seat of the team on the train split, the solver playing ``solver_text``."""
    from marft_envs.wrappers import SingleSeat

    others = {SEAT: (lambda env, agent, obs: solver_text)}
    seat = SingleSeat(TEAM_ENV, seat="answerer_1", others=others, split="train")
    seat.reset(seed=seed)
    return seat


def make_handoff_trainer(magrpo):
    """Adaptation 3: CoMLRL's MAGRPOTrainer with the solver -> answerer hand-off."""

    class HandOffMAGRPO(magrpo.MAGRPOTrainer):
        def __init__(self, *args, settings: dict, prompt_tokenizer, **kwargs):
            super().__init__(*args, **kwargs)
            self.settings, self.prompt_tokenizer = settings, prompt_tokenizer
            self._solver: list[str] = []
            self.gen_seconds, self.gen_tokens = 0.0, 0

        def answerer_prompt(self, item, solver_text: str) -> str:
            seat = _seat_env(self.settings, item["seed"], solver_text)
            messages = seat.unwrapped_aec.messages("answerer_1")
            seat.close()
            return self.prompt_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

        def _generate_completions_with_external_prompts(self, agent, batch_items, agent_idx=0,
                                                        num_return_sequences=1, max_new_tokens=128,
                                                        external_prompts=None, **kwargs):
            t0 = time.perf_counter()
            if agent_idx == 0:
                out = super()._generate_completions_with_external_prompts(
                    agent, batch_items, agent_idx=agent_idx, num_return_sequences=num_return_sequences,
                    max_new_tokens=max_new_tokens, external_prompts=external_prompts, **kwargs)
                self._solver = list(out["completions"][0])
            else:
                solver = self._solver[:num_return_sequences]
                prompts = [self.answerer_prompt(batch_items[0], s) for s in solver]
                out = self._generate_per_prompt(agent, batch_items, agent_idx, prompts, max_new_tokens)
            self.gen_seconds += time.perf_counter() - t0
            self.gen_tokens += sum(self.reply_length(t, agent_idx) for t in out["completion_input_ids"][0])
            return out

        def reply_length(self, tokens, agent_idx: int) -> int:
            """Generated tokens up to and including the first EOS (or pad), as ours counts;
            CoMLRL's ``response_lens`` counts to the first pad, which ``generate`` fills with
            the generation config's pad id (EOS for SmolLM2), not CoMLRL's."""
            tok = self.tokenizers[agent_idx]
            ends = {tok.eos_token_id, tok.pad_token_id}
            return next((i + 1 for i, t in enumerate(tokens.tolist()) if t in ends), len(tokens))

        def _generate_per_prompt(self, agent, batch_items, agent_idx, prompts, max_new_tokens):
            """One sampled reply per prompt, in one left-padded ``generate`` call with CoMLRL's
            sampling arguments; each reply keeps its own prompt for the loss."""
            tokenizer = self.tokenizers[agent_idx]
            rows = [tokenizer(p, truncation=True)["input_ids"] for p in prompts]
            ids, mask = left_pad(rows, tokenizer.pad_token_id)
            kwargs = {"do_sample": True, "temperature": self.args.temperature, "top_p": self.args.top_p,
                      "num_beams": 1, "max_new_tokens": max_new_tokens, "return_dict_in_generate": True}
            # no pad_token_id: as in CoMLRL's own call, generate pads finished replies with its
            # generation config's pad id, so both agents' completions end alike
            if self.args.top_k is not None:
                kwargs["top_k"] = self.args.top_k
            training = agent.training
            agent.eval()
            try:
                with torch.inference_mode():
                    seqs = agent.generate(input_ids=ids, attention_mask=mask, **kwargs).sequences
            finally:
                agent.train(training)
            completions, tokens, lens = [], [], []
            for row in seqs[:, ids.shape[1] :]:
                pads = (row == tokenizer.pad_token_id).nonzero()
                n = pads[0].item() if pads.shape[0] > 0 else row.shape[0]
                completions.append(tokenizer.decode(row[:n], skip_special_tokens=True))
                tokens.append(row.clone())
                lens.append(int(n))
            return {"prompts": prompts, "batch_items": batch_items,
                    "prompt_input_ids": torch.tensor([rows[0]]), "per_prompt_ids": [torch.tensor(r) for r in rows],
                    "prompt_attention_mask": torch.ones(1, len(rows[0]), dtype=torch.long),
                    "completions": [completions], "completion_input_ids": [tokens],
                    "completion_attention_mask": [[torch.ones(len(t)) for t in tokens]],
                    "response_lens": lens, "reference_kls": []}

        def _pack_completions_for_buffer(self, completions_data):
            packed = super()._pack_completions_for_buffer(completions_data)
            if "per_prompt_ids" in completions_data:
                packed["per_prompt_ids"] = completions_data["per_prompt_ids"]
            return packed

        def _compute_loss_with_gradients(self, agent, completions_data, returns):
            if "per_prompt_ids" not in completions_data:
                return super()._compute_loss_with_gradients(agent, completions_data, returns)
            # CoMLRL's loss, each reply with its own prompt: advantages as CoMLRL computes them
            # (mean baseline, then std normalisation), -sum(log p(completion)) * advantage,
            # averaged over the replies.
            returns_tensor = torch.tensor(returns, dtype=torch.float)
            advantages = self._compute_advantages(returns_tensor)
            if self.args.advantage_normalization and advantages.numel() > 1:
                std = advantages.std(unbiased=False).clamp(min=1e-6)
                advantages = (advantages - advantages.mean()) / std
            agent.train()
            total, n = torch.tensor(0.0, requires_grad=True), 0
            for j, (prompt, completion) in enumerate(zip(completions_data["per_prompt_ids"],
                                                         completions_data["completion_input_ids"][0], strict=False)):
                if j >= len(advantages) or len(completion) == 0:
                    continue
                input_ids = torch.cat([prompt, completion[:-1]]).unsqueeze(0)
                logits = agent(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), use_cache=False).logits
                logp = torch.log_softmax(logits[0, prompt.size(0) - 1 :], dim=-1)
                seq = logp.gather(-1, completion.unsqueeze(-1)).sum()
                total = total - seq * advantages[j]
                n += 1
            total = total / max(1, n)
            if torch.isnan(total) or torch.isinf(total):
                return torch.tensor(0.1, requires_grad=True)
            return total

    return HandOffMAGRPO


def handoff_reward(settings: dict):
    """Adaptation 4: the team reward of each aligned joint action, played in the environment."""
    def reward(solver_completions, answerer_completions, *, batch_items=None):
        out = []
        for solver, answerer in zip(solver_completions, answerer_completions, strict=True):
            seat = _seat_env(settings, batch_items[0]["seed"], solver)
            out.append(float(seat.step(answerer)[1]))
            seat.close()
        return out

    return reward


class CoMLRL:
    """CoMLRL's MAGRPO (one model per agent; ``lora=True``: a LoRA adapter on each copy, our r,
    alpha, dropout, target modules and learning rate). An iteration is the body of
    ``MAGRPOTrainer.train`` over ``problems`` dataset items: ``_train_step_returns`` per item
    (updates happen whenever a buffer holds ``rollout_buffer_size`` items), then
    ``_drain_ready_buffers``."""

    def __init__(self, settings: dict, lora: bool):
        magrpo = import_comlrl()
        if magrpo is None:
            raise RuntimeError("comlrl is not installed: run `make peers`")
        self.settings = settings
        cfg = our_config(settings)
        self.cfg = cfg
        agents = []
        for i in range(2):
            model, tok = load_base(settings["model"], seed=settings["seed"])
            if lora:
                from peft import LoraConfig, get_peft_model

                model = get_peft_model(model, LoraConfig(
                    r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha, lora_dropout=cfg.model.lora_dropout,
                    target_modules=list(cfg.model.target_modules), task_type="CAUSAL_LM"))
            agents.append(model)
            if i == 0:
                eval_tokenizer = tok
        # adaptation 2: CoMLRL's own tokenizer copy with a pad token that no prompt contains
        _, comlrl_tok = load_base(settings["model"], seed=settings["seed"])
        if comlrl_tok.pad_token_id == comlrl_tok.eos_token_id:
            vocab = comlrl_tok.get_vocab()
            pad = "<|endoftext|>" if "<|endoftext|>" in vocab else None
            if pad is None:
                comlrl_tok.add_special_tokens({"pad_token": "<|bench_pad|>"})
                for m in agents:
                    m.resize_token_embeddings(len(comlrl_tok))
            else:
                comlrl_tok.pad_token = pad
        comlrl_tok.padding_side = "left"
        self.tokenizer = comlrl_tok
        lr = cfg.algo.lr if lora else settings["comlrl_full_lr"]
        args = magrpo.MAGRPOConfig(
            num_agents=2, num_generations=settings["samples"], max_new_tokens=cfg.model.max_new_tokens,
            temperature=cfg.model.temperature, top_p=cfg.model.top_p, top_k=None, num_turns=1,
            joint_mode="aligned", agent_learning_rate=lr, eval_interval=0, logging_steps=1,
            num_train_epochs=1)
        self.lr = lr

        def solver_prompt(item):
            env = marft_envs.make(TEAM_ENV, split="train")
            env.reset(seed=item["seed"])
            messages = env.unwrapped.messages(SEAT)
            env.close()
            return comlrl_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

        trainer_cls = make_handoff_trainer(magrpo)
        self.trainer = trainer_cls(
            agents=agents, num_agents=2, tokenizer=comlrl_tok, reward_func=handoff_reward(settings),
            formatters=[solver_prompt, solver_prompt], args=args, train_dataset=[{"seed": 0}],
            settings=settings, prompt_tokenizer=comlrl_tok)
        for agent in self.trainer.agents:
            agent.train()
        self.iteration = 0
        self.models = dict(zip(("solver_0", "answerer_1"), self.trainer.agents, strict=True))
        self.evaluator = peer_evaluator(cfg, self.models)
        self.generator = PlainGenerator(self.models, eval_tokenizer)

    def step(self) -> dict:
        t = self.trainer
        t.gen_seconds, t.gen_tokens = 0.0, 0
        t0 = time.perf_counter()
        for seed in train_seeds(self.settings, self.iteration):
            t._train_step_returns({"seed": seed})
        t._drain_ready_buffers([i for i, b in enumerate(t.rollout_buffers) if b])
        self.iteration += 1
        return {"total_s": time.perf_counter() - t0, "gen_s": t.gen_seconds, "tokens": float(t.gen_tokens)}

    def evaluate(self) -> dict[str, float]:
        return scores(self.evaluator.play(self.generator, self.settings["eval_problems"]))

    def info(self) -> dict:
        return {"trainable": sum(trainable(a.parameters()) for a in self.trainer.agents),
                "peak_rss": peak_rss(), "lr": self.lr}

    def close(self) -> None:
        self.evaluator.close()


# ------------------------------------------------------------------------------- TRL


class TRL:
    """TRL's GRPOTrainer on the solver's seat through ``marft_envs.trl_bridge`` (the answerer
    echoes it), LoRA with our r, alpha, dropout, targets and learning rate. ``trainer.train()``
    runs in a thread that a callback holds before each step, so the benchmark drives it one
    step (= one generation batch = one optimiser step) at a time and evaluates between."""

    def __init__(self, settings: dict):
        from peft import LoraConfig
        from transformers import TrainerCallback
        from trl import GRPOConfig, GRPOTrainer

        from marft_envs.trl_bridge import TOOL_CAPABLE_CHATML, seat_dataset, seat_environment_factory, seat_reward

        self.settings = settings
        cfg = our_config({**settings, "env": register_seat_env()})
        self.cfg = cfg
        model, tok = load_base(settings["model"], seed=settings["seed"])
        _, eval_tok = load_base(settings["model"], seed=settings["seed"])
        # TRL's environment_factory insists on a chat template that renders tool calls; SmolLM2's
        # does not. The bridge's TOOL_CAPABLE_CHATML renders our (tool-free) prompts to the same
        # text as SmolLM2's own template, checked here; the tiny model's template is its own.
        probe = marft_envs.make(TEAM_ENV)
        probe.reset(seed=0)
        messages = probe.unwrapped.messages(SEAT)
        probe.close()
        own = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        tok.chat_template = TOOL_CAPABLE_CHATML
        if not settings["model"].startswith("tiny"):
            swapped = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            if swapped != own:
                raise RuntimeError("TOOL_CAPABLE_CHATML renders this model's prompts differently")
        self.tmp = tempfile.TemporaryDirectory()
        steps = settings["warmup"] + settings["iterations"]
        n = settings["problems"] * settings["samples"]
        args = GRPOConfig(
            output_dir=self.tmp.name, max_steps=steps, per_device_train_batch_size=n,
            num_generations=settings["samples"], max_completion_length=cfg.model.max_new_tokens,
            temperature=cfg.model.temperature, top_p=cfg.model.top_p, top_k=0,
            learning_rate=cfg.algo.lr, lr_scheduler_type="constant", max_grad_norm=cfg.algo.max_grad_norm,
            beta=0.0, gradient_checkpointing=cfg.model.gradient_checkpointing,  # TRL's default: True
            use_cpu=True, report_to=[], logging_steps=1, save_strategy="no", bf16=False,
            seed=settings["seed"], dataloader_num_workers=0)
        rows = seat_dataset(TEAM_ENV, SEAT, n=steps * settings["problems"],
                            seed=settings["seed"] * 1_000_000, split="train")
        go, done = threading.Semaphore(0), queue.Queue()
        self.go, self.done = go, done
        timing = {"gen_s": 0.0, "tokens": 0.0}
        self.timing = timing

        class Gate(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                go.acquire()
                timing.update(gen_s=0.0, tokens=0.0, t0=time.perf_counter())

            def on_step_end(self, args, state, control, **kwargs):
                done.put({"total_s": time.perf_counter() - timing["t0"], "gen_s": timing["gen_s"],
                          "tokens": timing["tokens"]})

        self.trainer = GRPOTrainer(
            model=model, args=args, reward_funcs=seat_reward, train_dataset=rows, processing_class=tok,
            environment_factory=seat_environment_factory(TEAM_ENV, SEAT, others="echo", split="train"),
            peft_config=LoraConfig(r=cfg.model.lora_r, lora_alpha=cfg.model.lora_alpha,
                                   lora_dropout=cfg.model.lora_dropout,
                                   target_modules=list(cfg.model.target_modules), task_type="CAUSAL_LM"),
            callbacks=[Gate()])
        generate = self.trainer._generate

        def timed_generate(prompts):
            t0 = time.perf_counter()
            out = generate(prompts)
            timing["gen_s"] += time.perf_counter() - t0
            timing["tokens"] += float(sum(len(ids) for ids in out[1]))
            return out

        self.trainer._generate = timed_generate
        self.models = {SEAT: self.trainer.model}
        self.evaluator = peer_evaluator(cfg, self.models)
        self.generator = PlainGenerator(self.models, eval_tok)
        self.error: list[BaseException] = []

        def run():
            try:
                self.trainer.train()
            except BaseException as exc:  # reported by step()
                self.error.append(exc)
                done.put(None)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def step(self) -> dict:
        self.go.release()
        out = self.done.get()
        if out is None:
            raise RuntimeError(f"TRL training failed: {self.error[0]!r}") from self.error[0]
        return out

    def evaluate(self) -> dict[str, float]:
        return scores(self.evaluator.play(self.generator, self.settings["eval_problems"]))

    def info(self) -> dict:
        return {"trainable": trainable(self.trainer.model.parameters()), "peak_rss": peak_rss()}

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.evaluator.close()
        with contextlib.suppress(Exception):
            self.tmp.cleanup()


# ------------------------------------------------------------------------------- registry

#: name -> builder; bench_peers.py groups them and labels them.
SYSTEMS: dict[str, Any] = {
    "ours": lambda s: Ours({**s, "env": TEAM_ENV}),
    "ours-mmap": lambda s: Ours({**s, "env": TEAM_ENV}),  # the parent sets MALLOC_MMAP_THRESHOLD_
    "comlrl-lora": lambda s: CoMLRL({**s, "env": TEAM_ENV}, lora=True),
    "comlrl-full": lambda s: CoMLRL({**s, "env": TEAM_ENV}, lora=False),
    "ours-seat": lambda s: Ours({**s, "env": register_seat_env(), "problems": s["seat_problems"]}),
    "trl-grpo": lambda s: TRL({**s, "problems": s["seat_problems"]}),
}


def build(name: str, settings: dict):
    torch.set_num_threads(settings["threads"])
    torch.manual_seed(settings["seed"])
    return SYSTEMS[name](settings)
