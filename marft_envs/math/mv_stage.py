"""The math-verify stage: HuggingFace's math-verify on pairs our own parser cannot read.

Runs only inside the killable worker (``worker.py``), in its main thread, so math-verify's
own signal-based limits work: they get ``MATH_VERIFY_SHARE`` of the time limit, and the
worker's kill stays the hard limit. Both sides are the already-extracted answers,
each given to ``math_verify.parse`` as LaTeX (``as_latex_input``: a bare answer wrapped in
``$...$``, its best input on the measured sets); ``verify`` is called with the reference as
gold, as math-verify's API asks. A fragment that ``parse`` read instead of the whole answer
(unbalanced braces) is "cannot tell", never "equal".
"""

from __future__ import annotations

import logging
import time

_LOGGERS = ("math_verify", "latex2sympy2_extended")


def _quiet() -> None:
    # math-verify logs a warning when its own timeouts are off: ours (a killed worker) apply.
    for name in _LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


def as_latex_input(text: str) -> str:
    """``text`` as math-verify's ``parse`` reads it best: a bare answer wrapped in ``$...$``."""
    from .extract import is_bare_answer

    if any(d in text for d in ("$", "\\boxed", "\\(", "\\[")):
        return text
    return f"${text}$" if is_bare_answer(text) else text


def _read_whole(parsed: list) -> bool:
    """Whether math-verify's ``parse`` read a whole expression, not a cut-off fragment.

    Its extraction can stop inside a group (``$1 - \\frac{1}{\\mathrm{e}}$`` is read as the
    string ``1 - \\frac{1}{`` and the value 1), and a fragment can equal anything: then
    ``1 - 1/e`` "equals" ``1 + 1/e`` (``mv-270``). The string it read is the last item.
    """
    text = next((x for x in reversed(parsed) if isinstance(x, str)), None)
    return text is None or text.count("{") == text.count("}")


def warm() -> None:
    """Import math-verify and run it once, so a worker's first job does not pay for that."""
    mv_equal("1", "1")


def mv_equal(answer: str, reference: str, seconds: int | None = None) -> bool | None:
    """Whether math-verify finds ``answer`` equal to ``reference``.

    False when it cannot tell; None when it ran out of ``seconds`` (math-verify's own
    signal-based limit, which works here: a worker runs its jobs in its main thread).
    """
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    _quiet()
    deadline = None if seconds is None else time.monotonic() + seconds

    def left() -> int | None:
        """Whole seconds left for the next call (math-verify's alarms take integers)."""
        if deadline is None:
            return None
        rest = deadline - time.monotonic()
        if rest <= 0:
            raise TimeoutException("math-verify's share of the time limit is spent")
        return max(1, round(rest))

    try:
        gold = parse(as_latex_input(reference), parsing_timeout=left(), raise_on_error=True)
        pred = parse(as_latex_input(answer), parsing_timeout=left(), raise_on_error=True)
        if not gold or not pred or not (_read_whole(gold) and _read_whole(pred)):
            return False
        return bool(verify(gold, pred, timeout_seconds=left(), raise_on_error=True))
    except TimeoutException:
        return None
    except Exception:  # noqa: BLE001 - math-verify's own parse/compare failure: it cannot tell
        return False
