"""Text generation behind one small interface.

A :class:`Generator` turns chat conversations into responses under a named adapter, returning
the text and the exact token ids (prompt and response) the trainer later scores. Two backends
implement it: :class:`HFGenerator` here (transformers ``generate``, CPU or GPU, the default) and
``baselines.distributed.vllm_generator.VLLMGenerator`` (``model.backend=vllm``: the base loaded
once, each adapter passed as a ``LoRARequest``; see docs/distributed.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from .models import AdapterModel

Messages = list[dict]


@dataclass
class SamplingSpec:
    """How responses are drawn. ``greedy`` ignores temperature and top-p."""

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False


@dataclass
class Generation:
    """Responses of one call, aligned with the input conversations."""

    texts: list[str]
    prompt_ids: list[list[int]]
    action_ids: list[list[int]]
    truncated: list[bool] = field(default_factory=list)  # hit max_new_tokens without stopping
    # log-probability of each response token under the sampling distribution, as the generator
    # computed it while sampling (the rollout side of ``train/logprob_mismatch``); a row may be
    # shorter than its response (vLLM may not report the stop token) or empty (not reported)
    logprobs: list[list[float]] = field(default_factory=list)


class Generator(Protocol):
    """Anything that can answer conversations under a named adapter (``None``: bare base)."""

    def generate(
        self, adapter: str | None, conversations: Sequence[Messages], sampling: SamplingSpec
    ) -> Generation: ...


def render_prompts(
    tokenizer, conversations: Sequence[Messages], max_prompt_tokens: int | None = None
) -> list[list[int]]:
    """Chat-template each conversation (with the assistant generation prompt) into token ids.

    Prompts longer than ``max_prompt_tokens`` keep their last tokens (the most recent context),
    a documented truncation rather than an error mid-run.
    """
    out = []
    for messages in conversations:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
            ids = ids[-max_prompt_tokens:]
        out.append(list(ids))
    return out


def stop_token_ids(tokenizer, strings: Sequence[str]) -> list[int]:
    """Every vocabulary id whose decoded text contains one of ``strings`` (``model.stop``).

    Generation stops on token ids, never on decoded text, so both backends stop at the same
    token and the trainer scores exactly what was sampled: a stop string becomes the ids of every
    token that contains it (for a newline: ``\n``, ``\n\n``, ``.\n``, ...). A string that
    only ever arises across two tokens is not caught; single characters always are.
    """
    if not strings:
        return []
    size = len(tokenizer)
    texts = tokenizer.batch_decode([[i] for i in range(size)])
    return [i for i, text in enumerate(texts) if any(s in text for s in strings)]


def left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad token id rows into ``(input_ids, attention_mask)``."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids, mask


def generation_config(sampling: SamplingSpec, pad_id: int | None, stop_ids: Sequence[int]):
    """A ``transformers.GenerationConfig`` built from ``sampling`` alone: the temperature and
    top-p the trainer scores with, no top-k, and every other logits processor off (repetition
    and n-gram penalties, minimum lengths, suppressed or forced tokens, ...), so a rollout
    samples from exactly the policy whose log-probabilities the PPO ratio uses. Only the stop
    ids come from outside (the tokenizer's EOS and the checkpoint's ``eos_token_id``)."""
    from transformers import GenerationConfig

    fields: dict = {
        "max_new_tokens": sampling.max_new_tokens,
        "pad_token_id": pad_id,
        "eos_token_id": list(stop_ids),
        "do_sample": not sampling.greedy,
        "num_beams": 1,
        "repetition_penalty": 1.0,
        "no_repeat_ngram_size": 0,
        "min_new_tokens": 0,
        "renormalize_logits": False,
        "remove_invalid_values": False,
    }
    if not sampling.greedy:
        fields.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
    return GenerationConfig(**fields)


@contextlib.contextmanager
def only_given_config(model) -> Iterator[None]:
    """Inside: ``model.generation_config`` is a blank ``GenerationConfig``, restored after.

    ``generate(generation_config=...)`` fills every field the given config leaves unset
    (``None``: sequence bias, bad words, suppressed tokens, min-p, typical-p, stop strings, ...)
    from the model's own config, i.e. a checkpoint's ``generation_config.json``; with a blank one
    there is nothing to fill them from but transformers' neutral defaults."""
    from transformers import GenerationConfig

    own = model.generation_config
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = own


class SampledLogprobs:
    """A transformers logits processor that records the log-probability of each sampled token.

    ``generate`` calls it once per new token with the scores that token is drawn from (before
    the temperature and top-p warpers, which come after custom processors), so each call
    records the previous token under the previous step's ``log_softmax(scores / temperature)``;
    :meth:`finish` adds the last token. Only one step's ``[B, vocabulary]`` log-probabilities
    are ever kept (``output_scores`` would keep every step's).
    """

    def __init__(self, temperature: float = 1.0):
        self.temperature = temperature
        self._last: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self._last is not None:
            self._steps.append(self._last.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self._last = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, new_tokens: torch.Tensor) -> torch.Tensor | None:
        """``[B, steps]`` log-probabilities of ``new_tokens`` (the generated ids, ``[B, steps]``);
        ``None`` when the calls do not match the tokens (a generation mode this does not cover)."""
        if self._last is None or len(self._steps) + 1 != new_tokens.shape[1]:
            return None
        last = self._last.gather(-1, new_tokens[:, -1:].to(self._last.device)).squeeze(-1)
        return torch.stack([*self._steps, last], dim=1).cpu()


class HFGenerator:
    """Batched, left-padded transformers ``generate`` on an
    :class:`~baselines.core.models.AdapterModel`, or on a plain causal LM given with its
    ``tokenizer`` (no adapters: ``generate`` takes ``adapter=None`` only; e.g. a model another
    trainer saved, :func:`~baselines.core.models.load_pretrained`).

    Response ids keep the stop token (the policy must learn to stop) and drop padding; texts are
    decoded without special tokens. Sampling draws from the global torch RNG, so a restored RNG
    state replays a rollout exactly.
    """

    def __init__(
        self,
        model,
        batch_size: int = 32,
        max_prompt_tokens: int | None = None,
        extra_stop_ids: Sequence[int] = (),
        tokenizer=None,
    ):
        self.model = model
        adapters = isinstance(model, AdapterModel)
        if not adapters and tokenizer is None:
            raise ValueError("HFGenerator on a plain causal LM needs its tokenizer")
        self.tokenizer = tokenizer if tokenizer is not None else model.tokenizer
        self.network = model.peft if adapters else model  # what generate runs on
        self.base = model.peft.get_base_model() if adapters else model
        self.batch_size = batch_size
        self.max_prompt_tokens = max_prompt_tokens
        eos = self.tokenizer.eos_token_id
        extra = self.base.generation_config.eos_token_id
        ids = {eos} | (set(extra) if isinstance(extra, (list, tuple)) else {extra})
        ids |= set(extra_stop_ids)  # model.stop (stop_token_ids)
        self.stop_ids = sorted(i for i in ids if i is not None)

    def generate(
        self, adapter: str | None, conversations: Sequence[Messages], sampling: SamplingSpec
    ) -> Generation:
        prompts = render_prompts(self.tokenizer, conversations, self.max_prompt_tokens)
        result = Generation([], [], [], [], [])
        for start in range(0, len(prompts), self.batch_size):
            self._generate_chunk(
                adapter, prompts[start : start + self.batch_size], sampling, result
            )
        return result

    def policy(self, adapter: str | None) -> contextlib.AbstractContextManager:
        """Context manager: ``adapter`` active inside (``None``: the bare base); a plain causal
        LM has no adapters and accepts ``None`` only."""
        if isinstance(self.model, AdapterModel):
            return self.model.reference() if adapter is None else self.model.using(adapter)
        if adapter is not None:
            raise ValueError(
                f"adapter {adapter!r} asked of a plain causal LM, which has none: generate "
                "with adapter=None (RoutedGenerator routes agents to their own models)"
            )
        return contextlib.nullcontext()

    @torch.no_grad()
    def _generate_chunk(self, adapter, prompts, sampling: SamplingSpec, result: Generation) -> None:
        pad = self.tokenizer.pad_token_id
        ids, mask = left_pad(prompts, pad)
        from transformers import LogitsProcessorList

        recorder = SampledLogprobs(1.0 if sampling.greedy else sampling.temperature)
        kwargs = {
            "generation_config": generation_config(sampling, pad, self.stop_ids),
            "logits_processor": LogitsProcessorList([recorder]),
        }
        device = self.model.device
        net = self.network
        was_training = net.training
        net.eval()
        try:
            with self.policy(adapter), only_given_config(self.base):
                out = net.generate(
                    input_ids=ids.to(device), attention_mask=mask.to(device), **kwargs
                )
        finally:
            net.train(was_training)
        new_ids = out[:, ids.shape[1] :]
        logprobs = recorder.finish(new_ids)
        new = new_ids.tolist()
        stops = set(self.stop_ids)
        for b, (prompt, row) in enumerate(zip(prompts, new, strict=True)):
            # generate pads a row only after its stop token, so a row without a stop token is
            # max_new_tokens genuine samples (a sampled pad id included)
            cut = next((i for i, tok in enumerate(row) if tok in stops), None)
            action = row if cut is None else row[: cut + 1]
            result.prompt_ids.append(list(prompt))
            result.action_ids.append(list(action))
            result.texts.append(self.tokenizer.decode(action, skip_special_tokens=True))
            result.truncated.append(cut is None)
            result.logprobs.append([] if logprobs is None else logprobs[b, : len(action)].tolist())


class RoutedGenerator:
    """A :class:`Generator` over one generator per route: ``generate(route, ...)`` answers with
    ``routes[route]`` under its bare model (``adapter=None``), e.g. one model per agent seat,
    each loaded from its own directory (``baselines.eval --agent-model SEAT=DIR``). Routes may
    share a generator."""

    def __init__(self, routes: Mapping[str, Generator]):
        if not routes:
            raise ValueError("RoutedGenerator needs at least one route")
        self.routes = dict(routes)

    def generate(
        self, adapter: str | None, conversations: Sequence[Messages], sampling: SamplingSpec
    ) -> Generation:
        if adapter not in self.routes:
            raise KeyError(f"no generator for {adapter!r}; routes: {sorted(self.routes)}")
        return self.routes[adapter].generate(None, conversations, sampling)
