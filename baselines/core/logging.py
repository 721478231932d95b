"""Metrics to the console, JSONL and TensorBoard; learning-curve plots; progress bars.

Metric keys are ``/``-separated: ``<group>/<name>`` for one series
(``critic/value_loss``, ``eval/score``, ``rollout/team_reward``) and
``<group>/<id>/<name>`` for one series per agent or critic
(``agent/reasoner_0/policy_loss``, ``critic/actor_1/value_loss``). Plots put every
``<group>/*/<name>`` in one panel with one line per id.

``metrics.jsonl`` holds one JSON object per :meth:`MetricsLogger.log` call:
``{"step": 3, "time": 1712345678.9, "<key>": value, ...}``; non-finite values are
written as ``null`` (strict JSON) and shown as NaN on the console.
"""

from __future__ import annotations

import fnmatch
import json
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "JSONL_NAME",
    "TENSORBOARD_DIR",
    "MetricsLogger",
    "plot_learning_curves",
    "plot_side_by_side",
    "read_jsonl",
]

JSONL_NAME = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"


def _number(key: str, value: Any) -> float:
    try:
        return float(value)  # ints, bools, numpy and 0-d torch scalars
    except (TypeError, ValueError):
        raise TypeError(
            f"metric {key!r} must be a number, got {type(value).__name__}: {value!r:.60}"
        ) from None


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.3e}"
    return f"{value:.4g}"


class MetricsLogger:
    """Write metrics to any of: the console, ``<out_dir>/metrics.jsonl``, TensorBoard.

    Args:
        out_dir: run directory (created).
        console: print one line per :meth:`log` call, grouped by key prefix.
        jsonl: append to ``metrics.jsonl``.
        tensorboard: write event files under ``<out_dir>/tensorboard``.
        resume_step: when resuming from a checkpoint taken after this step, drop the
            JSONL lines and TensorBoard points of later steps (they are redone), so the
            log of a resumed run equals that of an uninterrupted one.
        console_obj: a rich ``Console`` to print on (default: a new one on stderr).
    """

    def __init__(
        self,
        out_dir: str | Path,
        *,
        console: bool = True,
        jsonl: bool = True,
        tensorboard: bool = True,
        resume_step: int | None = None,
        console_obj: Console | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.console = console_obj or Console(stderr=True)
        self._console = console
        self.jsonl_path = self.out_dir / JSONL_NAME if jsonl else None
        self._jsonl = None
        if self.jsonl_path is not None:
            if resume_step is not None and self.jsonl_path.exists():
                kept = [r for r in read_jsonl(self.jsonl_path) if r.get("step", 0) <= resume_step]
                self.jsonl_path.write_text("".join(json.dumps(r) + "\n" for r in kept))
            self._jsonl = open(self.jsonl_path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # slow import: only when asked

            purge = None if resume_step is None else resume_step + 1
            self._tb = SummaryWriter(log_dir=str(self.out_dir / TENSORBOARD_DIR), purge_step=purge)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Record ``metrics`` (numbers: floats, ints, 0-d tensors) at ``step``."""
        values = {k: _number(k, v) for k, v in metrics.items()}
        if self._jsonl is not None:
            row: dict[str, Any] = {"step": int(step), "time": time.time()}
            row.update({k: (v if math.isfinite(v) else None) for k, v in values.items()})
            self._jsonl.write(json.dumps(row) + "\n")
            self._jsonl.flush()  # a crash loses at most the line being written
        if self._tb is not None:
            for k, v in values.items():
                if math.isfinite(v):
                    self._tb.add_scalar(k, v, int(step))
        if self._console:
            self.console.print(self.format_line(step, values), highlight=False)

    @staticmethod
    def format_line(step: int, values: Mapping[str, float]) -> str:
        """``step 3 | agent reasoner_0/policy_loss=0.12 ... | critic value_loss=...``."""
        groups: dict[str, list[str]] = defaultdict(list)
        for k, v in values.items():
            head, _, rest = k.partition("/")
            if rest:
                groups[head].append(f"{rest}={_fmt(v)}")
            else:  # a bare key has no group heading
                groups[""].append(f"{head}={_fmt(v)}")
        parts = [f"[bold]step {step}[/bold]"]
        parts += [
            (f"[cyan]{escape(g)}[/cyan] " if g else "") + escape(" ".join(items))
            for g, items in groups.items()
        ]
        return " | ".join(parts)

    def close(self) -> None:
        """Flush and close the files."""
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._tb is not None:
            self._tb.flush()
            self._tb.close()
            self._tb = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------
# reading and plotting


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``metrics.jsonl``; a truncated last line (a crash mid-write) is skipped."""
    rows = []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: line {i + 1} is not JSON: {line[:80]!r}") from None
    return rows


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in rows:
        v = r.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            xs.append(r["step"])
            ys.append(float(v))
    return xs, ys


def _metric_keys(rows: list[dict[str, Any]], patterns: list[str] | None) -> list[str]:
    keys: dict[str, None] = {}
    for r in rows:
        for k in r:
            if k not in ("step", "time"):
                keys.setdefault(k, None)
    if patterns is not None:
        keys = {k: None for k in keys if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    return list(keys)


def _panel_of(key: str) -> tuple[str, str]:
    """``agent/reasoner_0/policy_loss`` -> (``agent/*/policy_loss``, ``reasoner_0``)."""
    parts = key.split("/")
    if len(parts) >= 3:
        return "/".join([parts[0], "*", *parts[2:]]), parts[1]
    return key, ""


def _figure(n_panels: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, n_panels)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return plt, fig, list(axes.flat)


def _save(plt, fig, out_png: str | Path) -> Path:
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_learning_curves(
    jsonl_path: str | Path, out_png: str | Path, keys: list[str] | None = None
) -> Path:
    """Plot a run's metrics: one panel per metric group, one line per agent/critic id.

    Args:
        jsonl_path: a ``metrics.jsonl``.
        out_png: image to write.
        keys: glob patterns of keys to plot (``["agent/*/policy_loss", "eval/*"]``);
            default every metric.

    Returns:
        ``out_png`` as a Path.

    Raises:
        ValueError: no metric matches.
    """
    rows = read_jsonl(jsonl_path)
    panels: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key in _metric_keys(rows, keys):
        panel, label = _panel_of(key)
        panels[panel].append((label, key))
    if not panels:
        raise ValueError(
            f"no metrics to plot in {jsonl_path}" + (f" matching {keys}" if keys else "")
        )
    plt, fig, axes = _figure(len(panels))
    # the grid may have more cells than panels (3 columns)
    for ax, (panel, lines) in zip(axes, panels.items(), strict=False):
        for label, key in lines:
            ax.plot(
                *_series(rows, key), label=label or None, marker="." if len(rows) < 30 else None
            )
        ax.set_title(panel, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if any(label for label, _ in lines):
            ax.legend(fontsize=8)
    return _save(plt, fig, out_png)


def plot_bands(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]],
    out_png: str | Path,
    *,
    xlabel: str = "episodes",
    ylabel: str = "train/score",
) -> Path:
    """Mean curves with confidence bands: one panel per key of ``panels``, one line per run.

    Args:
        panels: ``{"credit-chain-3agent": {"marft": (xs, mean, low, high), ...}, ...}``; the
            four sequences have one value per point and the band is drawn from low to high.
        out_png: image to write.

    Returns:
        ``out_png`` as a Path.

    Raises:
        ValueError: no panel, or a line whose four sequences differ in length.
    """
    if not panels:
        raise ValueError("plot_bands needs at least one panel")
    for title, lines in panels.items():
        for name, seqs in lines.items():
            if len(seqs) != 4 or len({len(q) for q in seqs}) != 1:
                raise ValueError(
                    f"plot_bands: line {name!r} of panel {title!r} must be (xs, mean, low, high) "
                    f"of one length, got lengths {[len(q) for q in seqs]}"
                )
    plt, fig, axes = _figure(len(panels))
    # the grid may hold spare cells past the last panel (_figure hides them)
    for ax, (title, lines) in zip(axes, panels.items(), strict=False):
        for name, (xs, mean, low, high) in lines.items():
            (line,) = ax.plot(xs, mean, label=name)
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(plt, fig, out_png)


def plot_side_by_side(
    runs: Mapping[str, str | Path], key: str | list[str], out_png: str | Path
) -> Path:
    """Compare runs (methods): one panel per key, one line per run.

    Args:
        runs: ``{"MARFT": "runs/marft/metrics.jsonl", "IPPO": ...}``.
        key: a metric key, or a list of keys (``["rollout/team_reward", "eval/score"]``).
        out_png: image to write.

    Returns:
        ``out_png`` as a Path.

    Raises:
        ValueError: a key that no run logged.
    """
    keys = [key] if isinstance(key, str) else list(key)
    data = {name: read_jsonl(path) for name, path in runs.items()}
    for k in keys:
        if not any(_series(rows, k)[0] for rows in data.values()):
            raise ValueError(f"no run in {list(runs)} logged {k!r}")
    plt, fig, axes = _figure(len(keys))
    # the grid may have more cells than panels (3 columns)
    for ax, k in zip(axes, keys, strict=False):
        for name, rows in data.items():
            xs, ys = _series(rows, k)
            if xs:
                ax.plot(xs, ys, label=name)
        ax.set_title(k, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return _save(plt, fig, out_png)
