"""The advice as people paste it: the Pareto table, the env block and the Helm values.

``images.maxPixels`` sets vLLM's ``--mm-processor-kwargs`` max_pixels and
``SIDECAR_MAX_PIXELS`` together (see docs/deploy/helm.md); every other budget is a
``sidecar.config`` value named after its variable.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, TextIO

from sidecar.advisor.report import print_bands
from sidecar.advisor.sweep import Advice, Point
from sidecar.units import format_bytes


def _budgets(point: Point) -> dict[str, int]:
    values = {
        "max_image_tokens": point.max_image_tokens,
        "max_request_visual_tokens": point.max_request_visual_tokens,
    }
    return {name: value for name, value in values.items() if value is not None}


def env_block(advice: Advice) -> dict[str, str]:
    """``SIDECAR_*`` variables to set (vLLM needs the same max_pixels)."""
    point = advice.recommended
    env: dict[str, str] = {}
    if point.max_pixels is not None:
        env["SIDECAR_MAX_PIXELS"] = str(point.max_pixels)
    for name, value in _budgets(point).items():
        env[f"SIDECAR_{name.upper()}"] = str(value)
    if _budgets(point):
        env["SIDECAR_OVER_BUDGET_ACTION"] = "downscale"
    if advice.kv_budget_bytes > 0:
        env["SIDECAR_KV_BUDGET_BYTES"] = str(advice.kv_budget_bytes)
    return env


def helm_values(advice: Advice) -> dict[str, Any]:
    """The chart's values for the same settings."""
    point = advice.recommended
    config: dict[str, Any] = dict(_budgets(point))
    if config:
        config["over_budget_action"] = "downscale"
    if advice.kv_budget_bytes > 0:
        config["kv_budget_bytes"] = advice.kv_budget_bytes
    return {"images": {"maxPixels": point.max_pixels}, "sidecar": {"config": config}}


def advice_json(advice: Advice) -> dict[str, Any]:
    """``advise --json``."""
    return {
        "model": advice.model,
        "kv_pool_bytes_per_gpu": advice.pool_bytes_per_gpu,
        "points": len(advice.points),
        "pareto": [asdict(p) for p in advice.front],
        "recommended": asdict(advice.recommended),
        "kv_budgets": [asdict(row) for row in advice.kv_budgets],
        "env": env_block(advice),
        "helm": helm_values(advice),
        "notes": list(advice.notes),
    }


def _knob(value: int | None, default: str = "-") -> str:
    return default if value is None else f"{value:,}"


def print_advice(advice: Advice, out: TextIO) -> None:
    """The front, the recommendation, the in-flight budgets, and what to paste."""
    out.write(
        f"model: {advice.model}; KV pool per GPU: {format_bytes(advice.pool_bytes_per_gpu)}; "
        f"{len(advice.points)} candidates, {len(advice.front)} on the Pareto front\n\n"
    )
    header = (
        f"  {'max_pixels':>11} {'image tok':>9} {'req visual':>10} {'KV/req mean':>12} "
        f"{'KV/req p95':>11} {'KV saved/req':>13} {'downscaled':>10} {'rejected':>8} "
        f"{'max conc.':>9}"
    )
    out.write(header + "\n" + "-" * len(header) + "\n")
    for p in advice.front:
        mark = "*" if p == advice.recommended else " "
        out.write(
            f"{mark} {_knob(p.max_pixels, 'default'):>11} {_knob(p.max_image_tokens):>9} "
            f"{_knob(p.max_request_visual_tokens):>10} {format_bytes(p.kv_mean_bytes):>12} "
            f"{format_bytes(p.kv_p95_bytes):>11} {format_bytes(p.kv_saved_per_request):>13} "
            f"{p.images_downscaled_fraction:>10.1%} {p.rejected:>8,} {p.max_concurrency:>9,}\n"
        )
    out.write(
        f"\n* recommended: the most KV saved with no rejection and at most "
        f"{advice.target_downscaled_fraction:.0%} of images downscaled\n\n"
        f"in-flight budget (recorded arrivals and service times, recommended point):\n"
    )
    for row in advice.kv_budgets:
        out.write(
            f"  {row.fraction:>4.0%} of the pool = {format_bytes(row.budget_bytes):>10}: "
            f"{row.waited:,} waited, {row.status_429:,} got 429, peak in flight "
            f"{format_bytes(row.peak_inflight_bytes)}\n"
        )
        print_bands(row.bands, out, indent="      ")
    out.write("\nenvironment (vLLM needs the same --mm-processor-kwargs max_pixels):\n")
    for name, value in env_block(advice).items():
        out.write(f"  {name}={value}\n")
    values = helm_values(advice)
    out.write(f"\nHelm values:\nimages:\n  maxPixels: {_yaml(values['images']['maxPixels'])}\n")
    out.write("sidecar:\n  config:\n")
    for name, value in values["sidecar"]["config"].items():
        out.write(f"    {name}: {_yaml(value)}\n")
    for note in advice.notes:
        out.write(f"\nnote: {note}")
    if advice.notes:
        out.write("\n")


def _yaml(value: object) -> str:
    return "null" if value is None else str(value)
