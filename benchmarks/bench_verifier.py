"""Benchmark: our math grader against math-verify and the Qwen2.5-Math grader, one run.

    python benchmarks/bench_verifier.py [--timeout 5] [--show]

Data this project did not write (``tests/data/verifier_external``, loaded by
``benchmarks/verifier_sets.py``): labelled pairs from other graders' test suites, in source
groups, and real SmolLM2 completions with a human-read answer; plus our own labelled set
(``tests/data/math_equivalence.jsonl``, group ``own-set``) as a regression group.

Prints, per source group and per class, right / false-equal / missed-equal for each grader;
totals over all rows and over the unambiguous ones; extraction accuracy on the real
completions; throughput (pairs/s) and the worst single pair over the whole set and over
MATH-500's 500 reference solutions; ratios against math-verify; the per-family table of the
hard-families rows (and with ExtractionConfig(real_domain="loose") and (real_domain=False), and
with the conventions rounded_decimals / percent_fraction / degrees_radians / integer_parameter all
off, plus each off alone);
the quality bars of issues 10 and 28 with "ok" or "MISSED"; and the time each grader takes on
pathological pairs.

The anchors, as their users call them:

* math-verify 0.9.0: ``verify(parse(gold), parse(pred))``, bare answers wrapped in ``$...$``
  (its best input), its own 5 s time limits (signals, main thread);
* the Qwen2.5-Math grader as the MARFT reference code uses it:
  ``math_equal(extract_answer(pred), gold)``, from the PyPI package ``evalscope==0.17.1``
  (``evalscope/metrics/math_parser.py``, "largely borrows from Qwen2.5-Math"; installed with
  ``--no-deps`` plus ``word2number``; the file is loaded on its own, without evalscope's
  package ``__init__``); golds that are whole solutions go through its ``extract_answer``
  too; a 5 s alarm stands in for the time limit it lacks.

Every grader runs one pair at a time in the main thread. Our worker pool is started first
(``warmup``), as a trainer's would be after its first batch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OWN_SET = ROOT / "tests" / "data" / "math_equivalence.jsonl"
DATA_DIR = Path(os.environ.get("MARFT_DATA_DIR", ROOT.parent / "shared" / "data"))
MATH500 = DATA_DIR / "math" / "math500_test.jsonl"
TOWER = "2^{2^{2^{2^{2^{100}}}}}"
PATHOLOGICAL = [  # the first three are settled by size bounds; the last two need sympy, which hangs
    (f"\\boxed{{{TOWER}}}", "3"),
    ("\\boxed{(10^{10^{10}})!}", "5"),
    (f"\\boxed{{{TOWER}}}", f"{TOWER}+1"),
    (f"\\boxed{{{TOWER}}}", "4^{2^{2^{2^{2^{99}}}}}"),
    ("\\boxed{(10^{8})!}", "\\frac{(10^{8}+1)!}{10^{8}+1}"),
]
OURS, MV, QWEN = "ours", "math-verify", "qwen2.5-math"


@dataclass(frozen=True)
class Row:
    group: str
    cls: str
    pred: str
    gold: str
    equal: bool
    unambiguous: bool
    rid: str


def external_rows() -> tuple[list[Row], list[dict]]:
    from benchmarks.verifier_sets import load_completions, load_pairs

    pairs = [
        Row(r["group"], r["class"], r["pred"], r["gold"], r["equal"], r["unambiguous"], r["id"])
        for r in load_pairs()
    ]
    completions = load_completions()
    graded = [
        Row(
            "completions",
            f"{r['dataset']}/{r['format']}",
            r["completion"],
            r["gold"],
            r["correct"],
            r["reviewed"],
            r["id"],
        )
        for r in completions
    ]
    return pairs + graded, completions


def own_rows() -> list[Row]:
    rows = [json.loads(line) for line in OWN_SET.read_text().splitlines() if line.strip()]
    return [
        Row("own-set", r["category"], r["prediction"], r["gold"], r["equal"], True, f"own-{i}")
        for i, r in enumerate(rows)
    ]


# -- the graders ------------------------------------------------------------------------


OUR_REASONS: Counter = Counter()  # our verdicts' reasons over the whole set


def ours(pred: str, gold: str, timeout: float) -> bool:
    from marft_envs.math import verify

    v = verify(pred, gold, timeout=timeout)
    OUR_REASONS[v.reason] += 1
    return v.correct


def ours_complex_domain(pred: str, gold: str, timeout: float) -> bool:
    """Ours with ``ExtractionConfig(real_domain=False)`` (the option's other setting)."""
    from marft_envs.math import ExtractionConfig, verify

    return verify(pred, gold, timeout=timeout, config=ExtractionConfig(real_domain=False)).correct


def ours_loose_domain(pred: str, gold: str, timeout: float) -> bool:
    """Ours with ``ExtractionConfig(real_domain="loose")`` (the math-4/5 rule)."""
    from marft_envs.math import ExtractionConfig, verify

    config = ExtractionConfig(real_domain="loose")
    return verify(pred, gold, timeout=timeout, config=config).correct


CONVENTIONS = ("rounded_decimals", "percent_fraction", "degrees_radians", "integer_parameter")


def ours_with(**options: bool) -> Callable[[str, str, float], bool]:
    """Ours with ``ExtractionConfig(**options)`` (the conventions' other settings)."""
    from marft_envs.math import ExtractionConfig, verify

    config = ExtractionConfig(**options)

    def grade(pred: str, gold: str, timeout: float) -> bool:
        return verify(pred, gold, timeout=timeout, config=config).correct

    return grade


def math_verify(pred: str, gold: str, timeout: float) -> bool:
    from math_verify import parse, verify

    from marft_envs.math.mv_stage import as_latex_input as _latex_input

    try:
        limit = max(1, int(timeout))
        return bool(
            verify(
                parse(_latex_input(gold), parsing_timeout=limit),
                parse(_latex_input(pred), parsing_timeout=limit),
                timeout_seconds=limit,
            )
        )
    except Exception:  # noqa: BLE001 - an anchor's own failure is its "not equal"
        return False


def math_verify_extract(completion: str) -> str | None:
    from math_verify import parse

    try:
        found = parse(completion, parsing_timeout=5)
    except Exception:  # noqa: BLE001
        return None
    texts = [x for x in found if isinstance(x, str)]
    return texts[-1] if texts else (str(found[0]) if found else None)


class _Alarm(Exception):
    pass


def _with_alarm(fn: Callable, timeout: float):
    def on_alarm(signum, frame):
        raise _Alarm

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def load_qwen():
    """The Qwen2.5-Math grader module from evalscope 0.17.1, or (None, why not).

    `make setup` installs evalscope into ``.cache/bench-anchors`` (``MARFT_BENCH_ANCHORS``), not
    the venv: it ships a top-level ``tests`` package that would shadow the project's."""
    anchors = Path(os.environ.get("MARFT_BENCH_ANCHORS", ROOT / ".cache" / "bench-anchors"))
    if anchors.is_dir() and str(anchors) not in sys.path:
        sys.path.append(str(anchors))  # last: only for what nothing else provides (word2number)
    spec = importlib.util.find_spec("evalscope")
    if spec is None or not spec.submodule_search_locations:
        return None, (
            f"evalscope==0.17.1 (which ships it) is not in {anchors}: pip install --no-deps "
            f"--target {anchors} evalscope==0.17.1 word2number==1.1"
        )
    path = Path(spec.submodule_search_locations[0]) / "metrics" / "math_parser.py"
    if not path.exists():
        return None, f"{path} is missing (evalscope >= 1.0 replaced it with math-verify)"
    module_spec = importlib.util.spec_from_file_location("qwen25_math_parser", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except ImportError as e:
        return None, f"its imports fail ({e}): pip install word2number regex latex2sympy2_extended"
    return module, ""


def qwen_grader(module) -> Callable[[str, str, float], bool]:
    from marft_envs.math.extract import is_bare_answer

    def grade(pred: str, gold: str, timeout: float) -> bool:
        def run() -> bool:
            # Qwen's own pipeline strips the gold (parse_ground_truth); whole solutions are
            # read by its extract_answer.
            ref = (
                module.strip_answer_string(gold)
                if is_bare_answer(gold)
                else module.extract_answer(gold)
            )
            return bool(module.math_equal(module.extract_answer(pred), ref))

        try:
            return _with_alarm(run, timeout)
        except (_Alarm, Exception):  # noqa: BLE001 - its own failure is its "not equal"
            return False

    return grade


# -- running and reporting --------------------------------------------------------------


def _child(conn, fn, pred: str, gold: str, timeout: float) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # no OOM-killing the host
    try:
        conn.send(bool(fn(pred, gold, timeout)))
    except BaseException:  # noqa: BLE001 - MemoryError and the like: the anchor failed
        conn.send(None)


def isolated(fn, pred: str, gold: str, timeout: float) -> str:
    """Run an anchor in a forked child that is killed 5 s past the limit (they lack ours)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, pred, gold, timeout), daemon=True)
    t = time.perf_counter()
    proc.start()
    got = parent.recv() if parent.poll(timeout + 5) else "killed"
    proc.kill()
    proc.join()
    verdict = {True: "equal", False: "not equal", None: "failed", "killed": "killed"}[got]
    return f"{verdict} in {time.perf_counter() - t:.2f}s"


def run(fn, rows: list[Row], timeout: float) -> tuple[list[bool], list[float]]:
    got, times = [], []
    for r in rows:
        t = time.perf_counter()
        got.append(fn(r.pred, r.gold, timeout))
        times.append(time.perf_counter() - t)
    return got, times


def counts(rows: list[Row], got: list[bool]) -> tuple[int, int, int, int]:
    """(right, false-equal, missed-equal, n)."""
    right = sum(g == r.equal for r, g in zip(rows, got))
    fe = sum(g and not r.equal for r, g in zip(rows, got))
    me = sum(not g and r.equal for r, g in zip(rows, got))
    return right, fe, me, len(rows)


def cell(c: tuple[int, int, int, int]) -> str:
    return f"{c[0]:>4}/{c[3]:<4}{c[1]:>3}{c[2]:>4}"


def report_groups(rows: list[Row], results: dict[str, list[bool]], show: bool) -> dict:
    names = list(results)
    head = "".join(f"{n:>17}" for n in names)
    sub = "".join(f"{'right/n  FE  ME':>17}" for _ in names)
    best = {}
    for group in dict.fromkeys(r.group for r in rows):
        idx = [i for i, r in enumerate(rows) if r.group == group]
        print(
            f"\n== group {group} ({len(idx)} rows, {sum(rows[i].unambiguous for i in idx)}"
            " unambiguous)"
        )
        print(f"{'class':<24}{head}\n{'':<24}{sub}")
        by_cls = defaultdict(list)
        for i in idx:
            by_cls[rows[i].cls].append(i)
        for cls in sorted(by_cls):
            ii = by_cls[cls]
            line = "".join(
                f"{cell(counts([rows[i] for i in ii], [results[n][i] for i in ii])):>17}"
                for n in names
            )
            print(f"{cls:<24}{line}")
        for label, keep in (("all rows", lambda r: True), ("unambiguous", lambda r: r.unambiguous)):
            ii = [i for i in idx if keep(rows[i])]
            cs = {n: counts([rows[i] for i in ii], [results[n][i] for i in ii]) for n in names}
            print(f"{'TOTAL ' + label:<24}" + "".join(f"{cell(cs[n]):>17}" for n in names))
            best[(group, label)] = cs
        if show:
            for i in idx:
                if results[OURS][i] != rows[i].equal:
                    r = rows[i]
                    print(
                        f"   ours wrong [{r.cls}] {r.rid} label={r.equal} "
                        f"{'U' if r.unambiguous else 'ambiguous'} gold={r.gold[-60:]!r} "
                        f"pred={r.pred[-80:]!r}"
                    )
    return best


HARD = "hard-families"


def family_report(
    rows: list[Row], results: dict[str, list[bool]], misses: bool = True
) -> dict[str, tuple]:
    """Per answer family of the ``hard-families`` rows (unambiguous ones): equivalents accepted
    and non-equivalents rejected, each grader side by side. Returns the totals per grader as
    (accepted, equivalents, rejected, non-equivalents)."""
    idx = [i for i, r in enumerate(rows) if r.group == HARD and r.unambiguous]
    if not idx:
        return {}
    names = list(results)
    print(
        f"\n== {HARD}: per family (unambiguous rows; accepted = equivalents graded equal, "
        "rejected = non-equivalents graded different)"
    )
    head = "".join(f" {n + ' acc':>26} {n + ' rej':>26}" for n in names)
    print(f"{'family':<20}{'eq':>4}{'ne':>4}{head}")
    families = sorted({rows[i].cls for i in idx})
    totals = {n: [0, 0, 0, 0] for n in names}
    for fam in [*families, "ALL"]:
        ii = [i for i in idx if fam == "ALL" or rows[i].cls == fam]
        pos = [i for i in ii if rows[i].equal]
        neg = [i for i in ii if not rows[i].equal]
        line = f"{fam:<20}{len(pos):>4}{len(neg):>4}"
        for n in names:
            acc = sum(results[n][i] for i in pos)
            rej = sum(not results[n][i] for i in neg)
            line += f" {f'{acc}/{len(pos)}':>26} {f'{rej}/{len(neg)}':>26}"
            if fam == "ALL":
                totals[n] = [acc, len(pos), rej, len(neg)]
        print(line)
    for n in names:
        a, p_, r_, q = totals[n]
        print(
            f"  {n:<14} accepts {a}/{p_} = {a / max(1, p_):.1%} of equivalents, rejects "
            f"{r_}/{q} = {r_ / max(1, q):.1%} of non-equivalents"
        )
    wrong = [i for i in idx if misses and results[OURS][i] != rows[i].equal]
    for i in wrong:
        r = rows[i]
        print(
            f"   ours {'misses' if r.equal else 'FALSE EQUAL'} [{r.cls}] {r.rid} "
            f"gold={r.gold!r} pred={r.pred!r} "
            f"(math-verify {'equal' if results[MV][i] else 'different'})"
        )
    return {n: tuple(t) for n, t in totals.items()}


def extraction_report(completions: list[dict], qwen) -> float:
    from marft_envs.math import extract, normalize, verify

    def same(found: str | None, human: str | None) -> bool:
        """The human's answer, written the same or equal as a bare answer ("not possible")."""
        if human is None or found is None or not str(found).strip():
            return human is None and (found is None or not str(found).strip())
        return normalize(str(found)) == normalize(human) or verify(str(found), human).correct

    extractors = {OURS: lambda c: extract(c).answer, MV: math_verify_extract}
    if qwen is not None:
        extractors[QWEN] = lambda c: qwen.extract_answer(c) or None
    print(
        f"\n== extraction from real completions ({len(completions)}; the human-read answer, "
        "None where the model gave none)"
    )
    ours_rate = 0.0
    for name, fn in extractors.items():
        ok = sum(same(fn(r["completion"]), r["answer"]) for r in completions)
        rate = ok / max(1, len(completions))
        ours_rate = rate if name == OURS else ours_rate
        print(f"  {name:<14} {ok}/{len(completions)} = {rate:.1%}")
    return ours_rate


def throughput(name: str, times: list[float]) -> str:
    return f"{name:<14} {len(times) / sum(times):>9.1f} pairs/s   worst pair {max(times) * 1000:9.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--timeout", type=float, default=5.0, help="time limit per pair, every grader")
    ap.add_argument("--show", action="store_true", help="list every row our grader gets wrong")
    args = ap.parse_args()
    logging.disable(logging.WARNING)  # math-verify logs every time-out it hits

    from marft_envs.math import warmup

    t = time.perf_counter()
    warmup()
    print(f"our worker pool start-up: {time.perf_counter() - t:.2f}s (not timed below)")
    try:
        rows, completions = external_rows()
    except (ImportError, FileNotFoundError) as e:
        print(f"external set unavailable ({e}); only our own set is graded")
        rows, completions = [], []
    rows = rows + own_rows()
    qwen, why = load_qwen()
    graders = {OURS: ours, MV: math_verify}
    if qwen is None:
        print(f"Qwen2.5-Math grader unavailable: {why}")
    else:
        graders[QWEN] = qwen_grader(qwen)
    results, times = {}, {}
    for name, fn in graders.items():
        results[name], times[name] = run(fn, rows, args.timeout)
    reasons = ", ".join(f"{k} {n}" for k, n in OUR_REASONS.most_common())
    print(f"our verdicts by reason over the whole set: {reasons}")
    best = report_groups(rows, results, args.show)

    print("\n== over every group")
    anchors = [n for n in graders if n != OURS]
    unamb = [i for i, r in enumerate(rows) if r.unambiguous and r.group != "own-set"]
    negatives = [i for i, r in enumerate(rows) if not r.equal and r.group != "own-set"]
    for name in graders:
        u = counts([rows[i] for i in unamb], [results[name][i] for i in unamb])
        fe_all = sum(results[name][i] for i in negatives)
        fe_u = sum(results[name][i] for i in negatives if rows[i].unambiguous)
        print(
            f"  {name:<14} unambiguous external rows right {u[0]}/{u[3]} = {u[0] / max(1, u[3]):.1%}"
            f"   false equal: {fe_all} of {len(negatives)} negatives "
            f"({fe_u} of {sum(rows[i].unambiguous for i in negatives)} unambiguous)"
        )
    hard = family_report(rows, results)
    # The option's other settings, on the same rows (not part of the bars).
    variant = "ours real_domain=False"
    alt, _ = run(ours_complex_domain, rows, args.timeout)
    loose_name = "ours real_domain=loose"
    loose, _ = run(ours_loose_domain, rows, args.timeout)
    print("\n== option ExtractionConfig.real_domain: default True vs 'loose' vs False, same rows")
    family_report(
        rows,
        {OURS: results[OURS], loose_name: loose, variant: alt, MV: results[MV]},
        misses=False,
    )
    for name, got in ((OURS, results[OURS]), (loose_name, loose), (variant, alt)):
        fe = sum(got[i] for i in negatives if rows[i].unambiguous)
        u = counts([rows[i] for i in unamb], [got[i] for i in unamb])
        print(
            f"  {name:<24} unambiguous external rows right {u[0]}/{u[3]}, false equal on "
            f"unambiguous negatives {fe}"
        )
    # The conventions of issue 28 (ExtractionConfig fields, all on by default): all off, and
    # each off alone, on the same rows.
    off_name = "ours conventions off"
    settings = {off_name: dict.fromkeys(CONVENTIONS, False)}
    settings.update({f"ours {c}=False": {c: False} for c in CONVENTIONS})
    variants = {
        name: run(ours_with(**opts), rows, args.timeout)[0] for name, opts in settings.items()
    }
    print(f"\n== conventions ({', '.join(CONVENTIONS)}): default (all on) vs all off, same rows")
    family_report(
        rows, {OURS: results[OURS], off_name: variants[off_name], MV: results[MV]}, misses=False
    )
    for name, got in ((OURS, results[OURS]), *variants.items()):
        fe = sum(got[i] for i in negatives if rows[i].unambiguous)
        u = counts([rows[i] for i in unamb], [got[i] for i in unamb])
        h = [i for i in unamb if rows[i].group == HARD]
        acc = sum(got[i] for i in h if rows[i].equal)
        rej = sum(not got[i] for i in h if not rows[i].equal)
        print(
            f"  {name:<34} {HARD} accepted {acc}/{sum(rows[i].equal for i in h)}, rejected "
            f"{rej}/{sum(not rows[i].equal for i in h)}; unambiguous external rows right "
            f"{u[0]}/{u[3]}, false equal on unambiguous negatives {fe}"
        )
    ours_extraction = extraction_report(completions, qwen) if completions else 0.0

    print(f"\n== throughput over the whole set ({len(rows)} pairs, one at a time)")
    for name in graders:
        print("  " + throughput(name, times[name]))
    from marft_envs.math import verify_many

    t = time.perf_counter()
    verify_many([(r.pred, r.gold) for r in rows], timeout=args.timeout)
    batched = time.perf_counter() - t
    print(
        f"  {OURS + ' batched':<14} {len(rows) / batched:>9.1f} pairs/s   (verify_many: the "
        "worker pairs in parallel, as a trainer grades; not used for the bars)"
    )
    slow = {i for i, t in enumerate(times[OURS]) if t >= args.timeout}
    if slow:
        rest = [i for i in range(len(rows)) if i not in slow]
        ids = ", ".join(rows[i].rid for i in sorted(slow))
        print(f"  without the {len(slow)} pairs that ran into our time limit ({ids}):")
        for name in graders:
            print("    " + throughput(name, [times[name][i] for i in rest]))
    m500_times = {}
    if MATH500.exists():
        m500 = [json.loads(line) for line in MATH500.read_text().splitlines() if line.strip()]
        m500 = [
            Row("math500", r["subject"], r["solution"], r["answer"], True, True, r["unique_id"])
            for r in m500
        ]
        print(f"\n== MATH-500: {len(m500)} reference solutions vs their answers (all equal)")
        for name, fn in graders.items():
            got, m500_times[name] = run(fn, m500, args.timeout)
            print(f"  {throughput(name, m500_times[name])}   right {sum(got)}/{len(got)}")
    else:
        print(f"\nMATH-500 not found at {MATH500}: set MARFT_DATA_DIR")

    def pps(ts):
        return len(ts) / sum(ts)

    print("\n== ratios ours / math-verify")
    print(
        f"  throughput whole set {pps(times[OURS]) / pps(times[MV]):.1f}x, worst pair "
        f"{max(times[OURS]) / max(times[MV]):.2f}x"
        + (
            f"; MATH-500 throughput {pps(m500_times[OURS]) / pps(m500_times[MV]):.1f}x, worst "
            f"pair {max(m500_times[OURS]) / max(m500_times[MV]):.2f}x"
            if m500_times
            else ""
        )
    )

    print("\n== quality bars (issues 10 and 28)")

    def bar(ok: bool, text: str) -> None:
        print(f"  [{'ok' if ok else 'MISSED'}] {text}")

    for (group, label), cs in best.items():
        if label != "all rows" or group == "own-set":
            continue
        top = max(cs[a][0] for a in anchors)
        bar(cs[OURS][0] >= top, f"group {group}: ours {cs[OURS][0]} right >= best anchor {top}")
    u = counts([rows[i] for i in unamb], [results[OURS][i] for i in unamb])
    bar(
        u[0] >= 0.95 * u[3],
        f">= 95% right over unambiguous external rows: {u[0] / max(1, u[3]):.1%}",
    )
    fe_all = sum(results[OURS][i] for i in negatives)
    bar(fe_all == 0, f"zero false equal over all {len(negatives)} external negatives: {fe_all}")
    fe_u = [i for i in negatives if rows[i].unambiguous and results[OURS][i]]
    bar(
        not fe_u,
        f"zero false equal over the {sum(rows[i].unambiguous for i in negatives)} unambiguous "
        f"external negatives (old and new rows): {len(fe_u)}"
        + (f" ({', '.join(rows[i].rid for i in fe_u)})" if fe_u else ""),
    )
    if hard:
        acc, n_eq, rej, n_ne = hard[OURS]
        mv_acc, _, mv_rej, _ = hard[MV]
        bar(
            acc >= 0.8 * n_eq,
            f"{HARD}: accept >= 80% of equivalents: {acc / max(1, n_eq):.1%} "
            f"(math-verify {mv_acc / max(1, n_eq):.1%})",
        )
        bar(
            rej >= 0.99 * n_ne,
            f"{HARD}: reject >= 99% of non-equivalents: {rej / max(1, n_ne):.1%} "
            f"(math-verify {mv_rej / max(1, n_ne):.1%})",
        )
    bar(ours_extraction >= 0.95, f"extraction from real completions >= 95%: {ours_extraction:.1%}")
    ratio = pps(times[OURS]) / pps(times[MV])
    bar(ratio >= 10, f"throughput >= 10x math-verify over the whole set: {ratio:.1f}x")
    if m500_times:
        ratio = pps(m500_times[OURS]) / pps(m500_times[MV])
        bar(ratio >= 10, f"throughput >= 10x math-verify over MATH-500 references: {ratio:.1f}x")
    worst = max(max(times[OURS]), max(m500_times.get(OURS, [0])))
    bar(
        worst <= args.timeout + 0.5,
        f"worst pair within the time limit ({args.timeout:g}s, "
        f"+0.5s for the verdict to arrive): {worst:.2f}s",
    )

    print(f"\n== pathological pairs (time limit {args.timeout:g}s)")
    for pred, gold in PATHOLOGICAL:
        line = f"  {pred[7:-1]:<26} vs {gold:<28}"
        for name, fn in graders.items():
            if name == OURS:  # in-process: our own time limit is what is measured
                t = time.perf_counter()
                got = fn(pred, gold, args.timeout)
                line += f"  {name}: {'equal' if got else 'not equal'} in "
                line += f"{time.perf_counter() - t:.2f}s"
            else:
                line += f"  {name}: {isolated(fn, pred, gold, args.timeout)}"
        print(line)


if __name__ == "__main__":
    main()
