"""Build the ``hard-families`` rows of tests/data/verifier_external/pairs.jsonl from upstream files.

    python benchmarks/data/make_verifier_hard_pairs.py \\
        --stack  <moodle-qtype_stack>/tests/fixtures/answertestfixtures.class.php \\
        --nemo   <NeMo-Skills>/tests/test_math_equal.py \\
        --simple-evals <simple-evals>/common.py  > /tmp/hard.jsonl

Reads three files of other projects (not copied into this repository; only the (gold, pred,
label) rows are) and writes one pairs.jsonl row per labelled pair, labels unedited:

* STACK (maths/moodle-qtype_stack, GPL-3.0-or-later), ``answertestfixtures.class.php``: every
  one-line ``['AlgEquiv', '', SA, TA, score, ...]`` row with score 0 or 1 (-1/-2/-3 are STACK's
  own "test fails" / "known maths failure" markers, not labels) whose two sides use only
  notation a model writes for a maths answer (Maxima syntax: ``*``, ``^``, ``sqrt(..)``,
  ``log(..)``, ``%pi``, ``n!``, ``f(x):=..``, ``and``/``or`` of relations). Rows using
  Maxima-only machinery (``assume``, ``ev``, ``%i``, lists ``[..]``, sets ``{..}``, ``#pm#``,
  ``matrix``, ``diff``, ``sum``, logic constants, strings, ``inf``) are left out. ``pred`` is
  the student's answer (SA), ``gold`` the teacher's (TA).
* NeMo-Skills (NVIDIA/NeMo-Skills, Apache-2.0), ``tests/test_math_equal.py``: every pair of
  ``test_correct_examples`` (label equal) and ``test_incorrect_examples`` (label different);
  the test asserts both orders, ``gold`` is the pair's first item; ``None`` items are left out.
* simple-evals (openai/simple-evals, MIT), ``common.py::EQUALITY_TEMPLATE``: the eight worked
  examples ("Expression 1 / Expression 2 / Yes|No") of its equality-judge prompt.

``class`` is the answer family (``FAMILIES``), decided from the strings by :func:`family`.
"""

# ruff: noqa: E501  (the notes on upstream labels are data, one line each)
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

STACK_REF = "maths/moodle-qtype_stack@a14f3034a0e45aab27dcae96c526a6095dbf6ef7"
NEMO_REF = "NVIDIA/NeMo-Skills@0b012df8a09cd4730d31b16e90a0d8f13d145fb8"
SIMPLE_REF = "openai/simple-evals@ee3b0318d8d1d9d72755a4120879be65f7c07e9e"

# Maxima-only constructs: a row using one of these is not a model's answer notation.
STACK_EXCLUDE = re.compile(
    r"%i|#|\[|\{|\"|'|assume|declare|\bev\(|rectform|polarform|trig[a-z]+\(|ratsimp|radcan|"
    r"logcontract|exdowncase|integerp|lowesttermsp|scientific|significantfigures|round\(|"
    r"stack|diff|\bint\(|sum\(|product\(|matrix|noun|\btrue\b|\bfalse\b|\ball\b|\bnone\b|"
    r"\bnot\b|xor|xnor|implies|\binf\b|minf|\boo\(|\bcc\(|\bco\(|\boc\(|%union|%intersection|"
    r"natural_domain|signum|\blg\(|\broot\(|\bF\(|epsilon|disp_complex|ntuple|\bA and\b|"
    r"\bC and\b|\bB and\b|\bA\b|\bB\b|binomial\(x,|taylor|displaysci"
)
# Rows whose STACK label rests on a STACK convention rather than on the two answers' value.
STACK_AMBIGUOUS = {
    (
        "x1",
        "x_1",
    ): "STACK atom convention: x1 and x_1 are different atoms; in LaTeX x_1 is a subscript",
    (
        "sigma>1",
        "x>1",
    ): "STACK's inequality solver ignores the variable's name; as answers these name different variables",
    (
        "a>1",
        "x>1",
    ): "STACK's inequality solver ignores the variable's name; as answers these name different variables",
    (
        "x=x",
        "y=y",
    ): "STACK convention: two identities are the same (both sides true for every value)",
    (
        "a=a",
        "x=x",
    ): "STACK convention: two identities are the same (both sides true for every value)",
    ("2=3", "1=4"): ("STACK convention: two equations with no solution are the same"),
    ("2=3", "2=4"): ("STACK convention: two equations with no solution are the same"),
    ("3=0", "none"): ("STACK convention"),
    ("0=3", "none"): ("STACK convention"),
    (
        "x-1",
        "(x^2-1)/(x+1)",
    ): "equal except at x=-1, where the teacher's answer is undefined; STACK says equal",
    (
        "f(x)=x^2",
        "f(x):=x^2",
    ): "STACK convention: a function definition (:=) is not an equation (=); as a written answer both state f(x) = x^2",
    (
        "f(x):=x^2",
        "f(x)=x^2",
    ): "STACK convention: a function definition (:=) is not an equation (=); as a written answer both state f(x) = x^2",
    (
        "452",
        "4.52*10^2",
    ): "4.52*10^2 is exactly 452; STACK's label follows Maxima's binary floats (4.52*10^2 evaluates to 452.00000000000006)",
    (
        "100.4-80.0",
        "20.4",
    ): "100.4-80.0 is exactly 20.4; STACK's label follows Maxima's binary floats (20.400000000000006)",
    (
        "0.333333333333333",
        "1/3",
    ): "tolerance convention: STACK compares floats with rationals exactly; graders with a relative tolerance (this project 1e-9, math-verify) call them equal",
    (
        "0.333333333333333*x^2",
        "x^2/3",
    ): "tolerance convention: STACK compares floats with rationals exactly; graders with a relative tolerance (this project 1e-9) call them equal",
    (
        "2^((1/5.1)*t)",
        "2^(0.196078431373*t)",
    ): "tolerance convention: 0.196078431373 is 1/5.1 to 12 digits; graders with a relative tolerance of 1e-9 call them equal",
    (
        "1",
        "x=1",
    ): "STACK convention: the teacher's answer is an equation, so a bare value is of the wrong type; answer graders (this project, math-verify) accept the value of a stated 'x ='",
    (
        "log(abs((x^2-9)))",
        "log(abs(x-3))+log(abs(x+3))",
    ): "DISAGREE: log|x^2-9| = log|x-3| + log|x+3| for every x other than 3 and -3; STACK's AlgEquiv expects 0 (its Int test accepts the same antiderivative written log|(x-3)(x+3)|, line 1979). Label kept as upstream states it",
}

FAMILIES = (
    "function",  # f(x)=.. answers: renamed variable, name dropped/added
    "inequality",  # relations, chains, unions of relations
    "equation",  # equations as answers
    "identity-trig",
    "identity-log-exp",
    "factorial-binomial",
    "roots-powers",
    "algebra",  # polynomials and rational expressions in programming syntax
    "numeric",
    "units-words",
    "latex-notation",
)


def family(gold: str, pred: str) -> str:
    s = f"{gold} {pred}"
    if ":=" in s or re.search(r"\b[fg]\([a-z,]+\)\s*=", s):
        return "function"
    if re.search(r"[<>]|\\le|\\ge", s):
        return "inequality"
    if "=" in s:
        return "equation"
    if re.search(r"\b(a?sin|a?cos|a?tan|sec|csc|cosec|cot|sinh|cosh|tanh|csch|cosech)\b", s):
        return "identity-trig"
    if re.search(r"\b(log|ln|exp)\b|%e|\be\^", s):
        return "identity-log-exp"
    if "!" in s or "binomial" in s:
        return "factorial-binomial"
    if re.search(r"sqrt|\^\(?-?\d*/|\^\(1/", s):
        return "roots-powers"
    if re.search(r"\\text|\\mathrm|\\textbf|degrees|feet|\\%|%|\\\$", s):
        return "units-words"
    if re.search(r"\\[a-z]+|\\\\", s):
        return "latex-notation"
    if re.search(r"[a-z]", s, re.I):
        return "algebra"
    return "numeric"


def row(rid, gold, pred, equal, source, ref, licence, note="", unambiguous=True) -> dict:
    return {
        "id": rid,
        "gold": gold,
        "pred": pred,
        "equal": equal,
        "unambiguous": unambiguous,
        "class": family(gold, pred),
        "group": "hard-families",
        "source": source,
        "source_ref": ref,
        "licence": licence,
        "note": note,
    }


STACK_ROW = re.compile(
    r"^\s*\['AlgEquiv', '', '((?:[^'\\]|\\.)*)', '((?:[^'\\]|\\.)*)', (-?\d), '((?:[^'\\]|\\.)*)'"
)


def stack_rows(path: str) -> list[dict]:
    out, seen = [], set()
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        m = STACK_ROW.match(line)
        if not m:
            continue
        sa, ta, score = m.group(1), m.group(2), int(m.group(3))
        if score not in (0, 1) or not sa or not ta:
            continue
        if STACK_EXCLUDE.search(sa) or STACK_EXCLUDE.search(ta):
            continue
        if (sa, ta) in seen:  # STACK repeats a few rows; keep the first
            continue
        seen.add((sa, ta))
        why = STACK_AMBIGUOUS.get((sa, ta), "")
        out.append(
            row(
                f"stack-{len(out):03d}",
                ta,
                sa,
                score == 1,
                "STACK answer tests (maths/moodle-qtype_stack)",
                f"{STACK_REF} tests/fixtures/answertestfixtures.class.php line {n} "
                f"(AlgEquiv, expected {score})",
                "GPL-3.0-or-later",
                note=(
                    "pred = student's answer, gold = teacher's answer (Maxima syntax)"
                    + (f"; {why}" if why else "")
                ),
                unambiguous=not why,
            )
        )
    return out


def nemo_rows(path: str) -> list[dict]:
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    out = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not fn.decorator_list:
            continue
        equal = {"test_correct_examples": True, "test_incorrect_examples": False}.get(fn.name)
        if equal is None:
            continue
        params = fn.decorator_list[0].args[1]
        # the list holds literals and one arithmetic literal (5 / 2): evaluate it, no names
        pairs = eval(compile(ast.Expression(params), path, "eval"), {"__builtins__": {}})
        for i, pair in enumerate(pairs):
            a, b = pair
            if a is None or b is None:
                continue
            out.append(
                row(
                    f"nemo-{'eq' if equal else 'ne'}-{i:02d}",
                    str(a),
                    str(b),
                    equal,
                    "NeMo-Skills math grader tests (NVIDIA/NeMo-Skills)",
                    f"{NEMO_REF} tests/test_math_equal.py::{fn.name}[{i}]",
                    "Apache-2.0",
                    note="upstream asserts both orders; gold is the pair's first item"
                    + (
                        "; a non-string item is given as Python's str()"
                        if not (isinstance(a, str) and isinstance(b, str))
                        else ""
                    ),
                )
            )
    return out


def simple_evals_rows(path: str) -> list[dict]:
    text = Path(path).read_text(encoding="utf-8")
    template = text.split('EQUALITY_TEMPLATE = r"""', 1)[1].split("---", 1)[0]
    found = re.findall(
        r"Expression 1: (.*)\n\s*Expression 2: (.*)\n\n(Yes|No)\n?(\(.*\))?", template
    )
    out = []
    for i, (e1, e2, label, why) in enumerate(found):
        ambiguous = "don't mark them equivalent" in (why or "")
        out.append(
            row(
                f"simple-evals-{i}",
                e2.strip(),
                e1.strip(),
                label == "Yes",
                "simple-evals equality-judge examples (openai/simple-evals)",
                f"{SIMPLE_REF} common.py::EQUALITY_TEMPLATE example {i}",
                "MIT",
                note="gold = Expression 2, pred = Expression 1"
                + (
                    f"; upstream: {why}; a convention of that judge (the values are equal)"
                    if ambiguous
                    else (f"; upstream: {why}" if why else "")
                ),
                unambiguous=not ambiguous,
            )
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stack", required=True)
    ap.add_argument("--nemo", required=True)
    ap.add_argument("--simple-evals", required=True)
    args = ap.parse_args()
    rows = stack_rows(args.stack) + nemo_rows(args.nemo) + simple_evals_rows(args.simple_evals)
    for r in rows:
        sys.stdout.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
