"""The replay's report: one JSON-ready summary, and the same as a readable table.

"before" is each priced request as it was recorded (as the client sent it, priced under the
recording's settings); "after" is each request the candidate forwards, at the cost it
forwards (after any downscale). Percentiles are nearest-rank.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.records import TrafficRecord
from sidecar.advisor.replay import ReplayResult
from sidecar.units import format_bytes

QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50, p95 and p99; zeros for no values."""
    ordered = sorted(values)
    if not ordered:
        return {name: 0 for name, _ in QUANTILES}
    return {name: ordered[max(0, math.ceil(q * len(ordered)) - 1)] for name, q in QUANTILES}


def summarize(
    records: Sequence[TrafficRecord], result: ReplayResult, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The report of one replay (``replay --json`` prints it)."""
    outcomes = result.outcomes
    decisions = Counter(o.decision.value for o in outcomes)
    reasons = Counter(
        str(o.reason.value if isinstance(o.reason, Reason) else o.reason) for o in outcomes
    )
    priced = [r for r in records if r.cost is not None]
    forwarded = [o.priced for o in outcomes if o.forwarded and o.priced is not None]
    waited = [
        o.wait_seconds
        for o in outcomes
        if o.decision is Decision.WAIT or (o.decision is Decision.DOWNSCALE and o.wait_seconds > 0)
    ]
    recorded_decisions = Counter(r.decision for r in records)
    timeouts = reasons.get(Reason.QUEUE_TIMEOUT.value, 0)
    full = reasons.get(Reason.QUEUE_FULL.value, 0)
    return {
        "requests": len(outcomes),
        "decisions": {d.value: decisions.get(d.value, 0) for d in Decision},
        "reasons": dict(sorted(reasons.items())),
        "recorded": {
            "decisions": {d.value: recorded_decisions.get(d.value, 0) for d in Decision},
            "reasons": dict(sorted(Counter(r.reason for r in records).items())),
        },
        "before": {
            "visual_tokens": percentiles([r.visual_tokens for r in priced]),
            "prompt_tokens": percentiles([r.prompt_tokens for r in priced]),
            "kv_bytes": percentiles([r.kv_bytes for r in priced]),
        },
        "visual_tokens_per_request": percentiles([p.visual_tokens for p in forwarded]),
        "prompt_tokens_per_request": percentiles([p.prompt_tokens for p in forwarded]),
        "kv_bytes_per_request": percentiles([p.kv_bytes for p in forwarded]),
        "images": {
            "total": sum(len(r.cost.images) for r in priced if r.cost is not None),
            "downscaled": sum(p.downscaled_images for p in forwarded),
        },
        "queue": {
            "waited": len(waited),
            "wait_seconds": {**percentiles(waited), "max": max(waited, default=0.0)},
            "queue_timeout": timeouts,
            "queue_full": full,
            "status_429": timeouts + full,
            "larger_than_kv_budget": reasons.get(Reason.LARGER_THAN_KV_BUDGET.value, 0),
        },
        "peak_inflight_kv_bytes": result.simulated.peak_kv_bytes,
        "peak_inflight_requests": result.simulated.peak_requests,
        "service_time_estimated": result.service_time_estimated,
        "notes": list(notes),
    }


def print_report(summary: dict[str, Any], out: TextIO) -> None:
    """The summary as a readable report."""
    out.write(f"requests: {summary['requests']:,}\n\n")
    recorded = summary["recorded"]["decisions"]
    out.write(f"{'decision':<12}{'recorded':>10}{'replayed':>10}\n")
    for decision, count in summary["decisions"].items():
        out.write(f"{decision:<12}{recorded[decision]:>10,}{count:>10,}\n")
    out.write("\nreplayed by reason: ")
    out.write(", ".join(f"{k} {v:,}" for k, v in summary["reasons"].items()) + "\n\n")
    before = summary["before"]
    rows = (
        ("visual tokens", before["visual_tokens"], summary["visual_tokens_per_request"], str),
        ("prompt tokens", before["prompt_tokens"], summary["prompt_tokens_per_request"], str),
        ("KV per request", before["kv_bytes"], summary["kv_bytes_per_request"], format_bytes),
    )
    out.write(
        f"{'per request':<16}"
        + "".join(f"{'before ' + q:>14}{'after ' + q:>14}" for q, _ in QUANTILES)
        + "\n"
    )
    for name, was, now, show in rows:
        cells = "".join(f"{_cell(was[q], show):>14}{_cell(now[q], show):>14}" for q, _ in QUANTILES)
        out.write(f"{name:<16}{cells}\n")
    images, queue = summary["images"], summary["queue"]
    waits = queue["wait_seconds"]
    out.write(
        f"\nimages downscaled: {images['downscaled']:,} of {images['total']:,}\n"
        f"queue: {queue['waited']:,} waited (p50 {waits['p50']:.2f} s, p95 {waits['p95']:.2f} s, "
        f"max {waits['max']:.2f} s); 429: {queue['status_429']:,} "
        f"({queue['queue_timeout']:,} queue_timeout, {queue['queue_full']:,} queue_full); "
        f"413 larger than the budget: {queue['larger_than_kv_budget']:,}\n"
        f"peak in flight: {format_bytes(summary['peak_inflight_kv_bytes'])} of KV, "
        f"{summary['peak_inflight_requests']:,} requests\n"
    )
    for note in summary["notes"]:
        out.write(f"note: {note}\n")


def _cell(value: float, show: Any) -> str:
    return format_bytes(value) if show is format_bytes else f"{int(value):,}"
