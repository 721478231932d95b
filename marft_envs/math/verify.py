"""``verify`` and ``verify_many``: grade math answers, returning ``Verdict`` objects.

The flow for one pair: extract the answer from the prediction (a choice letter when
the reference is one), normalise both sides, then the cascade. The exact and numeric
steps run in-process (no sympy, no IPC); only pairs they cannot decide (or cannot read)
go to the time-limited worker pool, where sympy and then math-verify run.
``verify`` never raises and never hangs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..verdict import Verdict
from .conventions import equal_by_convention
from .equivalence import NUMERIC, UNDECIDED_METHODS, fast_compare, full_compare
from .extract import (
    DEFAULT_CONFIG,
    MATH_SEGMENT,
    ExtractionConfig,
    extract,
    is_bare_answer,
    labelled_items,
    labels_contradict,
    math_segment_count,
)
from .normalize import normalize, strip_units
from .structure import Assign, Bag, Relation, Union, parse_answer
from .version import GRADER_VERSION
from .worker import WorkerError, WorkerTimeout, get_pool

# "C", "(C)", "C. Cecile", "C Cecile": a choice letter, alone or before its option's text.
_CHOICE_REFERENCE = re.compile(r"^\(?([A-Za-z])\)?(?:$|[.:)]?\s*[A-Z][a-z])")

DEFAULT_TIMEOUT = 5.0
"""Seconds allowed for the symbolic (sympy) step of one pair."""

MATH_VERIFY_SHARE = 0.4
"""The part of the time limit math-verify gets in the worker (its own limits, whole seconds).

What it cannot decide in that time it does not decide (``timeout``): a pair that needs
seconds of sympy is rare in rewards, and a trainer waits for every verdict."""

MAX_ANSWER_CHARS = 2000
"""Longer extracted answers are not answers: reason ``invalid``."""


def _as_text(x: Any) -> str | None:
    if x is None:
        return None
    if isinstance(x, str):
        return x
    if isinstance(x, (bytes, bytearray)):
        return bytes(x).decode("utf-8", "replace")
    try:
        return str(x)
    except Exception:  # noqa: BLE001
        return None


def _verdict(
    start: float, correct: bool, answer: str | None, reason: str, source: str = "none", **kw: Any
) -> Verdict:
    return Verdict(
        correct=correct,
        answer=answer,
        reason=reason,
        score=1.0 if correct else 0.0,
        elapsed=time.perf_counter() - start,
        infra_error=kw.pop("infra_error", False),
        details=kw,
        grader_version=GRADER_VERSION,
        answer_source=source,
    )


class _Pending:
    """A pair the fast path could not decide (or read): it needs the worker."""

    def __init__(
        self,
        start: float,
        answer: str,
        source: str,
        pred: str,
        ref: str,
        reference: str,
        real_domain: bool | str = True,
    ) -> None:
        self.start, self.answer, self.source = start, answer, source
        self.pred, self.ref, self.reference = pred, ref, reference
        self.real_domain = real_domain


def reference_answer(reference: str, config: ExtractionConfig = DEFAULT_CONFIG) -> str:
    """The answer a reference states: itself when bare, else its box or answer phrase.

    References are normally bare answers; a whole solution (MATH's ``solution`` field,
    math-verify's gold texts) is read by the same extraction rules as a response.
    """
    if is_bare_answer(reference) and "\\boxed" not in reference:
        return reference
    labelled = labelled_items(reference)
    if labelled is not None:  # "Largest: 9, Smallest: 2": the ordered tuple (9, 2) (math-9)
        return "(" + ", ".join(v for _, v in labelled) + ")"
    found = extract(reference, replace(config, math_span=False, last_number=False, bare=False))
    if found.answer is None and math_segment_count(reference) == 1 and _states_span(reference):
        # "the solution to the problem is $m \\in [\\sqrt{2}, +\\infty)$": the one formula
        # of a sentence is what it states (math-7), when it is the stated value (math-9)
        found = extract(reference, replace(config, last_number=False, bare=False))
    if found.answer is None and math_segment_count(reference) > 1:
        # "The solution is $x = 4$ when $y = 2$.": a sentence with several formulas and no
        # stated answer is never read by its last number (math-10); its stated span (after
        # is/ist/es/...) is the answer, else it stays an unread sentence (text).
        return _stated_span(reference) or "\\text{" + MATH_SEGMENT.sub(_span_text, reference) + "}"
    return found.answer or reference


# What precedes a sentence's stated value: "is", "are", "equals", "=", ":".
_STATED_BY = re.compile(r"(?:\b(?:is|are|was|were|equals?)|=|:)\s*$", re.IGNORECASE)
# The same in the sentences of other languages (math-10): German ist/sind, Spanish es/son,
# French est/sont.
_STATED_BY_ANY = re.compile(
    r"(?:\b(?:is|are|was|were|equals?|ist|sind|es|son|est|sont)|=|:)\s*$", re.IGNORECASE
)


def _span_text(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).replace("{", " ").replace("}", " ")


def _stated_span(sentence: str) -> str | None:
    """The one formula of a sentence with several that follows its "is"/"ist"/"es"/"="/":"
    ("The solution is $x = 4$ when $y = 2$." -> ``x = 4``); None when none or more than one
    does (math-10)."""
    stated = [
        m
        for m in MATH_SEGMENT.finditer(sentence)
        if _STATED_BY_ANY.search(sentence[: m.start()].rstrip())
        and not MATH_SEGMENT.search(sentence[: m.start()])
    ]
    if len(stated) != 1:
        return None
    return next(g for g in stated[0].groups() if g is not None).strip()


def _states_span(sentence: str) -> bool:
    """Whether the one math span of ``sentence`` is its stated value (math-9): it follows
    "is"/"are"/"="/":", and no number stands outside it ("When $n=3$, the value is 10." and
    "The largest $n$ is 21." state 10 and 21, not their formula)."""
    m = MATH_SEGMENT.search(sentence)
    if m is None or not _STATED_BY.search(sentence[: m.start()]):
        return False
    return not re.search(r"\d", sentence[: m.start()] + sentence[m.end() :])


# Relations joined by "and" ("x<1 and x>3"): a system, all at once, never a union.
_AND_JOINED = re.compile(r"\\text\s*\{\s*and\s*\}|(?<![A-Za-z])and(?![A-Za-z])|\\land|\\wedge")


def _relations_of(shape: object, kind: type) -> bool:
    items = getattr(shape, "items", ())
    return type(shape) is kind and len(items) > 1 and all(type(i) is Relation for i in items)


def _system_against_union(answer: str, pred: str, ref_text: str, ref: str) -> bool:
    """Whether one side joins relations by "and" and the other by "or" (math-9: decided
    different here, not left to math-verify; "x<1 and x>3" is no "x<1 or x>3")."""
    p, r = parse_answer(pred), parse_answer(ref)
    return (
        _AND_JOINED.search(answer) is not None and _relations_of(p, Bag) and _relations_of(r, Union)
    ) or (
        _AND_JOINED.search(ref_text) is not None
        and _relations_of(r, Bag)
        and _relations_of(p, Union)
    )


# "or" between items: "x=1 \\text{ or } y=2", "x=1 or y=2".
_OR_JOINED = re.compile(r"\\text\s*\{\s*,?\s*or\s*\}|(?<![A-Za-z])or(?![A-Za-z])")


def _assignments_to_several(shape: object) -> bool:
    items = getattr(shape, "items", ())
    return (
        type(shape) is Bag
        and len(items) > 1
        and all(type(i) is Assign for i in items)
        and len({i.var for i in items}) > 1
    )


def _or_of_variables(answer: str, pred: str, ref_text: str, ref: str) -> bool:
    """Whether one side joins equations in different variables by "or" and the other is no
    such list (math-10: "x=1 or y=2" is no point (1, 2))."""
    p, r = parse_answer(pred), parse_answer(ref)
    return (
        _OR_JOINED.search(answer) is not None
        and _assignments_to_several(p)
        and not _assignments_to_several(r)
    ) or (
        _OR_JOINED.search(ref_text) is not None
        and _assignments_to_several(r)
        and not _assignments_to_several(p)
    )


def _by_label(ref_text: str, text: str | None) -> tuple[str, str | None]:
    """Two lists of labelled values compared label by label (math-9): both rewritten as
    tuples in the reference's label order; a prediction with other labels is a list that
    matches nothing ("Largest: 2, Smallest: 9" against "Largest: 9, Smallest: 2")."""
    ref_items = labelled_items(ref_text)
    pred_items = labelled_items(text) if text else None
    if ref_items is None or pred_items is None or labels_contradict(pred_items):
        return ref_text, text
    values = dict(pred_items)
    ref_tuple = "(" + ", ".join(v for _, v in ref_items) + ")"
    if set(values) != {label for label, _ in ref_items}:
        return ref_tuple, "(" + ", ".join(["\\text{?}"] * (len(ref_items) + 1)) + ")"
    return ref_tuple, "(" + ", ".join(values[label] for label, _ in ref_items) + ")"


def _choice_reference(ref: str, config: ExtractionConfig) -> str | None:
    """The letter of a multiple-choice reference (``C``, ``(C)``, ``C Cecile``), else None."""
    m = _CHOICE_REFERENCE.match(ref)
    return m.group(1) if m and m.group(1) in config.choices else None


CONVENTION = "convention"  # details["method"] of a pair equal by an ExtractionConfig convention


def _decides_equal(pred: str, ref: str, config: ExtractionConfig) -> bool:
    return fast_compare(pred, ref, config.real_domain)[0] is True


def _fast(prediction: Any, reference: Any, config: ExtractionConfig) -> Verdict | _Pending:
    start = time.perf_counter()
    try:
        ref_text = _as_text(reference)
        if ref_text is None or not ref_text.strip():
            return _verdict(
                start,
                False,
                None,
                "invalid",
                infra_error=True,
                error="the reference answer is empty",
            )
        text = _as_text(prediction)
        ref_text, text = _by_label(ref_text, text)
        ref_text = reference_answer(ref_text, config)
        ref = normalize(ref_text)
        letter = _choice_reference(ref, config)
        choice = letter is not None
        if letter is not None:
            ref = letter
        found = extract(text, config, choice=choice) if text else None
        if found is None or not found.answer:
            return _verdict(start, False, None, "no_answer")
        answer, source = found.answer, found.source
        if len(answer) > MAX_ANSWER_CHARS:
            return _verdict(
                start,
                False,
                answer[:100],
                "invalid",
                source,
                error=f"answer longer than {MAX_ANSWER_CHARS} characters",
            )
        pred = normalize(answer)
        if not any(c.isalpha() for c in re.sub(r"\\[A-Za-z]+", "", ref)):
            pred = strip_units(pred)  # "5cm" for 5; "3s" could be 3*s against a letter answer
        if not pred:
            return _verdict(start, False, answer, "no_answer", source, normalized=pred)
        if _system_against_union(answer, pred, ref_text, ref) or _or_of_variables(
            answer, pred, ref_text, ref
        ):
            return _verdict(
                start,
                False,
                answer,
                "mismatch",
                source,
                normalized=pred,
                reference=ref,
                method="exact",
            )
        equal, method = fast_compare(pred, ref, config.real_domain)
        if (
            not equal
            and not choice
            and equal_by_convention(
                answer, pred, ref_text, ref, config, lambda a, b: _decides_equal(a, b, config)
            )
        ):
            return _verdict(
                start,
                True,
                answer,
                NUMERIC,
                source,
                normalized=pred,
                reference=ref,
                method=CONVENTION,
            )
        if equal is None or (equal is False and method in UNDECIDED_METHODS):
            return _Pending(start, answer, source, pred, ref, ref_text, config.real_domain)
        return _verdict(
            start,
            equal,
            answer,
            method if equal else "mismatch",
            source,
            normalized=pred,
            reference=ref,
            method=method,
        )
    except Exception as e:  # noqa: BLE001 - a verifier bug must not crash a training run
        return _verdict(
            start, False, None, "error", infra_error=True, error=f"{type(e).__name__}: {e}"[:300]
        )


def _slow(p: _Pending, timeout: float) -> Verdict:
    info = {"normalized": p.pred, "reference": p.ref}
    try:
        mv_seconds = max(1, int(MATH_VERIFY_SHARE * timeout))
        equal, method = get_pool().run(
            full_compare,
            p.pred,
            p.ref,
            p.answer,
            p.reference,
            mv_seconds,
            p.real_domain,
            timeout=timeout,
        )
    except WorkerTimeout:
        return _verdict(p.start, False, p.answer, "timeout", p.source, timeout=timeout, **info)
    except (WorkerError, OSError, RuntimeError, AssertionError) as e:
        # AssertionError/RuntimeError: no worker can start here (a daemonic process, say)
        return _verdict(
            p.start,
            False,
            p.answer,
            "error",
            p.source,
            infra_error=True,
            error=f"{type(e).__name__}: {e}"[:300],
            **info,
        )
    return _verdict(
        p.start,
        equal,
        p.answer,
        method if equal or method == "timeout" else "mismatch",
        p.source,
        method=method,
        **info,
    )


def _config(config: ExtractionConfig | None, last_number_fallback: bool) -> ExtractionConfig:
    config = config or DEFAULT_CONFIG
    if not isinstance(config, ExtractionConfig):
        raise TypeError(f"config must be an ExtractionConfig, got {type(config).__name__}")
    return config if last_number_fallback else replace(config, last_number=False)


def verify(
    prediction: Any,
    reference: Any,
    *,
    timeout: float | None = None,
    last_number_fallback: bool = True,
    config: ExtractionConfig | None = None,
) -> Verdict:
    """Grade ``prediction`` (a whole response or a bare answer) against ``reference``.

    Returns a ``Verdict`` with ``score`` 1.0/0.0 and ``reason`` one of: ``exact``,
    ``numeric``, ``symbolic``, ``math-verify`` (correct); ``mismatch``, ``no_answer``,
    ``timeout``, ``invalid`` (wrong); ``error`` (a verifier fault, ``infra_error=True``).
    ``answer_source`` names the extraction rule that found the answer. The worker step is
    limited to ``timeout`` seconds (default ``DEFAULT_TIMEOUT``). ``config`` chooses the
    extraction rules (default ``ExtractionConfig()``); ``last_number_fallback=False`` turns
    the last-number rule off.
    """
    outcome = _fast(prediction, reference, _config(config, last_number_fallback))
    if isinstance(outcome, Verdict):
        return outcome
    return _slow(outcome, DEFAULT_TIMEOUT if timeout is None else timeout)


def verify_many(
    pairs: Iterable[tuple[Any, Any]],
    *,
    timeout: float | None = None,
    workers: int | None = None,
    last_number_fallback: bool = True,
    config: ExtractionConfig | None = None,
) -> list[Verdict]:
    """Grade many ``(prediction, reference)`` pairs; results keep the input order.

    The fast path runs here; pairs that need sympy run on up to ``workers``
    worker processes at once (default: the pool size, at most 4).
    """
    limit = DEFAULT_TIMEOUT if timeout is None else timeout
    chosen = _config(config, last_number_fallback)
    results: list[Verdict | _Pending] = [_fast(p, r, chosen) for p, r in pairs]
    pending = [(i, x) for i, x in enumerate(results) if isinstance(x, _Pending)]
    if pending:
        pool = get_pool(workers)
        n = min(len(pending), workers or pool.size)
        with ThreadPoolExecutor(max_workers=n) as ex:
            slow = ex.map(lambda job: _slow(job[1], limit), pending)
            for (i, _), v in zip(pending, slow, strict=True):
                results[i] = v
    return results  # type: ignore[return-value]


def warmup(workers: int | None = None) -> None:
    """Start the symbolic worker processes now (the first slow pair otherwise pays it)."""
    get_pool(workers).warmup()
