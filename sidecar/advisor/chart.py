"""The trade-off as a PNG: KV saved per request against images downscaled, one dot per
candidate, the Pareto front as a line and the recommendation marked.

matplotlib is the optional ``plot`` extra (``pip install 'vlm-sidecar[plot]'``); without it
``write_chart`` raises ConfigurationError saying so, and nothing else needs it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from sidecar.advisor.sweep import Advice
from sidecar.errors import ConfigurationError

MIB = 2**20


def require_matplotlib() -> Any:
    """matplotlib's pyplot on the Agg backend; ConfigurationError when it is missing."""
    try:
        matplotlib = importlib.import_module("matplotlib")
    except ImportError:
        raise ConfigurationError(
            "--chart needs matplotlib: pip install 'vlm-sidecar[plot]'"
        ) from None
    matplotlib.use("Agg")  # files only, no display
    return importlib.import_module("matplotlib.pyplot")


def write_chart(advice: Advice, path: Path) -> None:
    """Draw the sweep into ``path`` (PNG)."""
    plt = require_matplotlib()
    figure, axes = plt.subplots(figsize=(7.5, 4.5), dpi=100)
    baseline = advice.points[0].rejected  # what every candidate refuses (too many images, ...)
    clean = [p for p in advice.points if p.rejected <= baseline]
    refused = [p for p in advice.points if p.rejected > baseline]
    for points, colour, label in (
        (clean, "#9bb7d4", "candidate"),
        (refused, "#e0a0a0", "candidate that rejects more"),
    ):
        axes.scatter(
            [100 * p.images_downscaled_fraction for p in points],
            [p.kv_saved_per_request / MIB for p in points],
            s=14,
            c=colour,
            label=label,
        )
    front = advice.front
    axes.plot(
        [100 * p.images_downscaled_fraction for p in front],
        [p.kv_saved_per_request / MIB for p in front],
        color="#1f4e79",
        marker="o",
        markersize=4,
        linewidth=1.2,
        label="Pareto front",
    )
    best = advice.recommended
    axes.scatter(
        [100 * best.images_downscaled_fraction],
        [best.kv_saved_per_request / MIB],
        s=160,
        marker="*",
        c="#d4a017",
        edgecolors="black",
        zorder=5,
        label="recommended",
    )
    axes.axvline(
        100 * advice.target_downscaled_fraction,
        color="grey",
        linestyle=":",
        linewidth=1,
        label="target downscaled",
    )
    axes.set_xlabel("images downscaled (%)")
    axes.set_ylabel("KV saved per request (MiB, per GPU)")
    axes.set_title(f"{advice.model}: image budgets over recorded traffic", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)
