"""Math answer verification: extraction, normalisation, and the equivalence cascade.

    from marft_envs.math import verify
    verify("... so the answer is $\\boxed{\\frac{1}{2}}$.", "0.5")   # Verdict(correct=True, ...)

Exact and numeric checks run in-process; symbolic (sympy) checks run in a
killable worker process under a hard time limit. See docs/math_verifier.md.
"""

from .extract import SOURCES, Extraction, ExtractionConfig, extract, extract_answer
from .normalize import normalize
from .verify import (
    DEFAULT_TIMEOUT,
    MAX_ANSWER_CHARS,
    reference_answer,
    verify,
    verify_many,
    warmup,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ANSWER_CHARS",
    "SOURCES",
    "Extraction",
    "ExtractionConfig",
    "extract",
    "extract_answer",
    "normalize",
    "reference_answer",
    "verify",
    "verify_many",
    "warmup",
]
