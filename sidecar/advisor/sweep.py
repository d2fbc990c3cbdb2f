"""``advise``: sweep the image budgets over recorded traffic, keep the Pareto front, pick one.

Each point is a candidate: vLLM's ``max_pixels`` (the model's default, then a ladder down to
about 0.2 MP), a per-image token budget and a per-request visual-token budget (both with
``SIDECAR_OVER_BUDGET_ACTION=downscale``). Every record is priced under it with the serving
code (``repricing``). Per point:

- KV saved per request: the mean, over requests forwarded both ways, of the KV bytes under
  the baseline (the model's default ``max_pixels``, no image budgets) minus under the point;
- images downscaled: the fraction of images that reach vLLM with fewer tokens than under
  the baseline (the sidecar shrank them, or vLLM's lower ``max_pixels`` does);
- rejected: requests the point refuses;
- max concurrency: the KV pool per GPU over the mean KV per request, the arithmetic of
  ``vlm-sidecar plan`` (the pool comes from the command line's GPU figures).

The front keeps points no other point beats on all three of saved, downscaled and rejected.
The recommendation is the front's point that saves the most with no rejection (beyond those
the baseline makes: too many images, corrupt ones) and at most the target fraction
downscaled. Its in-flight budget is then replayed at fractions of the
pool (``KV_BUDGET_FRACTIONS``); 90 % of the pool is recommended.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sidecar.admission.decision import Decision, Reason
from sidecar.advisor.priced import Priced
from sidecar.advisor.records import RecordedCost, TrafficRecord
from sidecar.advisor.replay import replay
from sidecar.advisor.report import band_waits, weighted_percentiles
from sidecar.advisor.repricing import Candidate, with_settings
from sidecar.advisor.tally import tally
from sidecar.advisor.workers import fork_map
from sidecar.settings import Settings

PIXEL_LADDER = (8_028_160, 4_014_080, 2_007_040, 1_003_520, 802_816, 501_760, 200_704)
IMAGE_TOKEN_BUDGETS = (None, 4096, 2048, 1024, 512, 256)
REQUEST_VISUAL_BUDGETS = (None, 16_384, 8192, 4096)
KV_BUDGET_FRACTIONS = (1.0, 0.9, 0.75, 0.5)
RECOMMENDED_KV_FRACTION = 0.9
KNOBS = ("max_pixels", "max_image_tokens", "max_request_visual_tokens")


@dataclass(frozen=True, slots=True)
class Point:
    """One candidate and what it does to the traffic."""

    max_pixels: int | None  # None: the model's default
    max_image_tokens: int | None
    max_request_visual_tokens: int | None
    forwarded: int
    rejected: int
    kv_mean_bytes: int
    kv_p95_bytes: int
    kv_saved_per_request: int
    images_downscaled_fraction: float
    max_concurrency: int

    @property
    def budgets_set(self) -> int:
        return sum(
            v is not None
            for v in (self.max_pixels, self.max_image_tokens, self.max_request_visual_tokens)
        )


@dataclass(frozen=True, slots=True)
class KvBudgetRow:
    """The recommended point replayed under one in-flight budget."""

    fraction: float
    budget_bytes: int
    waited: int
    status_429: int
    peak_inflight_bytes: int
    # Per priority band, highest first (report.band_waits); empty with one band.
    bands: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Advice:
    """The sweep, its front, and the recommendation."""

    model: str
    pool_bytes_per_gpu: int
    points: tuple[Point, ...]
    front: tuple[Point, ...]
    recommended: Point
    kv_budgets: tuple[KvBudgetRow, ...]
    kv_budget_bytes: int
    target_downscaled_fraction: float
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Sweep:
    """What every point reads: the traffic's distinct costs, how often each was recorded and
    its baseline answer, and the settings the points change."""

    weights: Mapping[RecordedCost, int]
    base: Mapping[RecordedCost, Priced]
    plain: Settings
    pool_bytes: int


def _sweep_point(sweep: _Sweep, knobs: tuple[int | None, int | None, int | None]) -> Point:
    candidate = Candidate(with_settings(sweep.plain, **dict(zip(KNOBS, knobs, strict=True))))
    return _point(sweep.weights, sweep.base, candidate, knobs, sweep.pool_bytes)


def _point(
    weights: Mapping[RecordedCost, int],
    base: Mapping[RecordedCost, Priced],
    candidate: Candidate,
    knobs: tuple[int | None, int | None, int | None],
    pool_bytes: int,
) -> Point:
    """The point's figures: each distinct cost priced once, counted as often as recorded."""
    kv: Counter[int] = Counter()
    saved = both = images = shrunk = rejected = 0
    for cost, count in weights.items():
        after = candidate.price(cost)
        if after.decision is Decision.REJECT:
            rejected += count
            continue
        kv[after.kv_bytes] += count
        before = base[cost]
        if before.decision is not Decision.REJECT:
            saved += (before.kv_bytes - after.kv_bytes) * count
            both += count
            images += len(after.image_tokens) * count
            shrunk += count * sum(
                a < b for a, b in zip(after.image_tokens, before.image_tokens, strict=True)
            )
    forwarded = kv.total()
    mean = sum(value * count for value, count in kv.items()) // forwarded if forwarded else 0
    return Point(
        *knobs,
        forwarded=forwarded,
        rejected=rejected,
        kv_mean_bytes=mean,
        kv_p95_bytes=int(weighted_percentiles(kv)["p95"]),
        kv_saved_per_request=saved // both if both else 0,
        images_downscaled_fraction=shrunk / images if images else 0.0,
        max_concurrency=max(0, pool_bytes) // mean if mean else 0,
    )


def _kv_row(state: tuple[Sequence[TrafficRecord], Settings, int], fraction: float) -> KvBudgetRow:
    """The recommended point replayed with an in-flight budget of ``fraction`` of the pool."""
    records, chosen, pool_bytes = state
    budget = int(max(0, pool_bytes) * fraction)
    result = replay(records, Candidate(with_settings(chosen, kv_budget_bytes=budget)))
    counted = tally(result)
    reasons = counted.reasons
    return KvBudgetRow(
        fraction,
        budget,
        counted.decisions[Decision.WAIT],
        reasons[Reason.QUEUE_TIMEOUT] + reasons[Reason.QUEUE_FULL] + reasons[Reason.SHED],
        result.simulated.peak_kv_bytes,
        band_waits(result),
    )


def _knobs(point: Point) -> tuple[int | None, int | None, int | None]:
    return point.max_pixels, point.max_image_tokens, point.max_request_visual_tokens


def pareto_front(points: Sequence[Point]) -> list[Point]:
    """Points no other point beats on KV saved, images downscaled and rejected at once;
    among equal outcomes, the one with the fewest budgets set."""

    def key(p: Point) -> tuple[int, float, int]:
        return (-p.kv_saved_per_request, p.images_downscaled_fraction, p.rejected)

    def beats(a: Point, b: Point) -> bool:
        return all(x <= y for x, y in zip(key(a), key(b), strict=True)) and key(a) != key(b)

    unique: dict[tuple[int, float, int], Point] = {}
    for p in sorted(points, key=lambda p: (p.budgets_set, -(p.max_pixels or 1 << 62))):
        unique.setdefault(key(p), p)
    front = [p for p in unique.values() if not any(beats(q, p) for q in unique.values())]
    return sorted(front, key=lambda p: p.kv_saved_per_request)


def advise(
    records: Sequence[TrafficRecord],
    settings: Settings,
    *,
    pool_bytes: int,
    target_downscaled_fraction: float,
    notes: Sequence[str] = (),
    jobs: int = 1,
) -> Advice:
    """Sweep, keep the front, recommend a point and an in-flight budget; the points and the
    budgets are worked out in ``jobs`` processes at once."""
    plain = with_settings(
        settings,
        kv_budget_bytes=0,
        max_image_tokens=None,
        max_request_visual_tokens=None,
        over_budget_action="downscale",
    )
    baseline = Candidate(with_settings(plain, max_pixels=None))
    # Each distinct cost once (the reader shares equal ones), with how often it was recorded.
    weights = Counter(record.cost for record in records if record.cost is not None)
    base = {cost: baseline.price(cost) for cost in weights}
    default = getattr(baseline.profile.vision, "max_pixels", None)
    ladder = [None] + [p for p in PIXEL_LADDER if isinstance(default, int) and p < default]
    grid = list(itertools.product(ladder, IMAGE_TOKEN_BUDGETS, REQUEST_VISUAL_BUDGETS))
    points = fork_map(_sweep_point, _Sweep(weights, base, plain, pool_bytes), grid, jobs)
    front = pareto_front(points)
    # "No rejection": none beyond what the baseline refuses whatever the image budgets.
    eligible = [
        p
        for p in front
        if p.rejected <= points[0].rejected
        and p.images_downscaled_fraction <= target_downscaled_fraction
    ]
    recommended = max(eligible, key=lambda p: p.kv_saved_per_request, default=points[0])
    chosen = with_settings(plain, **dict(zip(KNOBS, _knobs(recommended), strict=True)))
    rows = fork_map(_kv_row, (records, chosen, pool_bytes), KV_BUDGET_FRACTIONS, jobs)
    return Advice(
        model=baseline.profile.name,
        pool_bytes_per_gpu=pool_bytes,
        points=tuple(points),
        front=tuple(front),
        recommended=recommended,
        kv_budgets=tuple(rows),
        kv_budget_bytes=int(max(0, pool_bytes) * RECOMMENDED_KV_FRACTION),
        target_downscaled_fraction=target_downscaled_fraction,
        notes=tuple(notes),
    )
