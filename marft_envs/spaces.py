"""A text space that accepts any unicode string (LaTeX, code, newlines, emoji).

Gymnasium's ``Text`` checks every character against a fixed charset, which rejects most LLM
output; here only the type and the length are constrained.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

_SAMPLE_ALPHABET = [*"abcxyz0123456789 +-*/=()\\{}^_.,\n", "é", "π", "∑", "—", "😀", "中"]


class UnicodeText(Space[str]):
    """Strings of at most ``max_length`` characters, any unicode."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        self.max_length = int(max_length)
        super().__init__(dtype=str, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        n = int(self.np_random.integers(1, 64))
        idx = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=n)
        return "".join(_SAMPLE_ALPHABET[i] for i in idx)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and other.max_length == self.max_length
