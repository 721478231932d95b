"""The paper's comparison as a picture: verified score by team size, one line per method."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable, Mapping
from typing import Any

# Matplotlib's font and text caches are shared state; draw one figure at a time.
_LOCK = threading.Lock()


def best_by_method_and_size(
    rows: Iterable[Mapping[str, Any]],
) -> dict[str, dict[int, Mapping[str, Any]]]:
    """For each method and team size, the submission with the best verified score."""
    best: dict[str, dict[int, Mapping[str, Any]]] = {}
    for r in rows:
        per_size = best.setdefault(r["method"], {})
        cur = per_size.get(r["team_size"])
        if cur is None or r["verified_score"] > cur["verified_score"]:
            per_size[r["team_size"]] = r
    return best


def score_by_team_size_png(rows: Iterable[Mapping[str, Any]], *, title: str = "") -> bytes:
    """A PNG: best verified score (with its 95% interval) against team size, per method."""
    # Imported here: matplotlib is slow to import and only the plot route needs it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = best_by_method_and_size(rows)
    with _LOCK:
        fig = Figure(figsize=(6.0, 3.6), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for method in sorted(best):
            sizes = sorted(best[method])
            pts = [best[method][n] for n in sizes]
            y = [p["verified_score"] for p in pts]
            err = [
                [p["verified_score"] - p["ci_low"] for p in pts],
                [p["ci_high"] - p["verified_score"] for p in pts],
            ]
            ax.errorbar(sizes, y, yerr=err, marker="o", capsize=4, label=method)
        all_sizes = sorted({n for m in best.values() for n in m})
        ax.set_xticks(all_sizes)
        ax.set_xlabel("team size (agents)")
        ax.set_ylabel("verified score (95% CI)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(
            f"{title}: best verified score by team size"
            if title
            else "best verified score by team size"
        )
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    return buf.getvalue()
