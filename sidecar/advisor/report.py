"""The replay's report: one JSON-ready summary, and the same as a readable table.

"before" is each priced request as it was recorded (as the client sent it, priced under the
recording's settings); "after" is each request the candidate forwards, at the cost it
forwards (after any downscale). Percentiles are nearest-rank.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any, TextIO, TypeVar

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.records import TrafficRecord, bulk
from sidecar.advisor.replay import FATE_REASONS, ReplayResult
from sidecar.advisor.tally import tally
from sidecar.units import format_bytes

QUANTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
Number = TypeVar("Number", int, float)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """Nearest-rank p50, p95 and p99; zeros for no values."""
    return weighted_percentiles(Counter(values))


def weighted_percentiles(counts: Mapping[Number, int]) -> dict[str, float]:
    """Nearest-rank p50, p95 and p99 of values given with how often each occurs: a
    million requests carry a few thousand distinct prices, and sorting those is cheap."""
    total = sum(counts.values())
    if not total:
        return {name: 0 for name, _ in QUANTILES}
    answer: dict[str, float] = {}
    ordered = iter(sorted(counts))  # the values alone: numbers sort faster than pairs
    value: float = 0
    seen = 0
    for name, quantile in QUANTILES:
        rank = max(1, math.ceil(quantile * total))
        while seen < rank:
            value = next(ordered)
            seen += counts[value]
        answer[name] = value
    return answer


def summarize(
    records: Sequence[TrafficRecord], result: ReplayResult, notes: Sequence[str] = ()
) -> dict[str, Any]:
    """The report of one replay (``replay --json`` prints it)."""
    with bulk():
        return _summarize(records, result, notes)


def _summarize(
    records: Sequence[TrafficRecord], result: ReplayResult, notes: Sequence[str]
) -> dict[str, Any]:
    counted = tally(result)
    # A recorded "within_budget" and the Reason are one key (StrEnum); str() gives the value.
    reasons = {str(reason): count for reason, count in counted.reasons.items()}
    waited = counted.waits
    costs = result.costs
    priced_records = (
        list(compress(records, map(is_not, costs, repeat(None)))) if result.unpriced else records
    )
    timeouts = reasons.get(Reason.QUEUE_TIMEOUT.value, 0)
    full = reasons.get(Reason.QUEUE_FULL.value, 0)
    shed = reasons.get(Reason.SHED.value, 0)
    recorded_decisions = Counter(map(attrgetter("decision"), records))
    return {
        "requests": len(costs),
        "decisions": {d.value: counted.decisions.get(d, 0) for d in Decision},
        "reasons": dict(sorted(reasons.items())),
        "recorded": {
            "decisions": {d.value: recorded_decisions.get(d.value, 0) for d in Decision},
            "reasons": dict(sorted(Counter(map(attrgetter("reason"), records)).items())),
        },
        "before": {
            name: weighted_percentiles(Counter(map(attrgetter(name), priced_records)))
            for name in ("visual_tokens", "prompt_tokens", "kv_bytes")
        },
        "visual_tokens_per_request": weighted_percentiles(counted.visual_tokens),
        "prompt_tokens_per_request": weighted_percentiles(counted.prompt_tokens),
        "kv_bytes_per_request": weighted_percentiles(counted.kv_bytes),
        "images": {"total": counted.images, "downscaled": counted.downscaled_images},
        "queue": {
            "waited": waited.total(),
            "wait_seconds": {**weighted_percentiles(waited), "max": max(waited, default=0.0)},
            "queue_timeout": timeouts,
            "queue_full": full,
            "shed": shed,
            "status_429": timeouts + full + shed,
            "larger_than_kv_budget": reasons.get(Reason.LARGER_THAN_KV_BUDGET.value, 0),
        },
        "bands": band_waits(result),
        "peak_inflight_kv_bytes": result.simulated.peak_kv_bytes,
        "peak_inflight_requests": result.simulated.peak_requests,
        "service_time_estimated": result.service_time_estimated,
        "notes": list(notes),
    }


def band_waits(result: ReplayResult) -> dict[str, dict[str, Any]]:
    """Per priority band (highest first): requests, how many waited and for how long (the
    granted ones), and the queue's 429s; empty when every request was in one band, or
    when nothing could wait (no in-flight budget, or shadow mode)."""
    classes = result.classes
    if classes is None:
        return {}
    requests = Counter(queue_class.priority for queue_class in classes)
    waits: dict[int, Counter[float]] = {band: Counter() for band in requests}
    refused: Counter[int] = Counter()
    queued = result.queued
    for number, fate, wait in zip(queued.numbers, queued.fates, queued.waits, strict=True):
        band = classes[number].priority
        if fate in FATE_REASONS:
            refused[band] += 1
        elif wait > 0:
            waits[band][wait] += 1
    return {
        str(band): {
            "requests": requests[band],
            "waited": waits[band].total(),
            "wait_seconds": {
                **weighted_percentiles(waits[band]),
                "max": max(waits[band], default=0.0),
            },
            "status_429": refused[band],
        }
        for band in sorted(requests, reverse=True)
    }


def print_bands(bands: Mapping[str, Mapping[str, Any]], out: TextIO, indent: str = "  ") -> None:
    """One line per priority band, when there are bands."""
    for band, row in bands.items():
        waits = row["wait_seconds"]
        out.write(
            f"{indent}band {band:>4}: {row['requests']:,} requests, {row['waited']:,} waited "
            f"(p50 {waits['p50']:.2f} s, p95 {waits['p95']:.2f} s, max {waits['max']:.2f} s), "
            f"{row['status_429']:,} got 429\n"
        )


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
        f"({queue['queue_timeout']:,} queue_timeout, {queue['queue_full']:,} queue_full, "
        f"{queue['shed']:,} shed); "
        f"413 larger than the budget: {queue['larger_than_kv_budget']:,}\n"
        f"peak in flight: {format_bytes(summary['peak_inflight_kv_bytes'])} of KV, "
        f"{summary['peak_inflight_requests']:,} requests\n"
    )
    if summary["bands"]:
        out.write("queue by priority band (higher is served first):\n")
        print_bands(summary["bands"], out)
    for note in summary["notes"]:
        out.write(f"note: {note}\n")


def _cell(value: float, show: Any) -> str:
    return format_bytes(value) if show is format_bytes else f"{int(value):,}"
