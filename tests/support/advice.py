"""A sweep's advice built by hand, for the tests of what is printed and drawn from it."""

from __future__ import annotations

from sidecar.advisor.sweep import Advice, KvBudgetRow, Point

MIB = 2**20


def point(
    saved_mib: int,
    downscaled: float,
    *,
    max_pixels: int | None = None,
    max_image_tokens: int | None = None,
    max_request_visual_tokens: int | None = None,
    rejected: int = 0,
) -> Point:
    """A candidate saving ``saved_mib`` MiB of KV per request and shrinking ``downscaled``."""
    return Point(
        max_pixels,
        max_image_tokens,
        max_request_visual_tokens,
        forwarded=100 - rejected,
        rejected=rejected,
        kv_mean_bytes=(200 - saved_mib) * MIB,
        kv_p95_bytes=(400 - saved_mib) * MIB,
        kv_saved_per_request=saved_mib * MIB,
        images_downscaled_fraction=downscaled,
        max_concurrency=50,
    )


BASELINE = point(0, 0.0)
RECOMMENDED = point(
    60, 0.08, max_pixels=1_003_520, max_image_tokens=1280, max_request_visual_tokens=4096
)
TOO_FAR = point(90, 0.4, max_pixels=200_704)
REFUSING = point(120, 0.2, max_image_tokens=64, rejected=7)


def advice(
    recommended: Point = RECOMMENDED, kv_budget_bytes: int = 9 * 2**30, notes: tuple[str, ...] = ()
) -> Advice:
    return Advice(
        model="Qwen/Qwen2.5-VL-7B-Instruct",
        pool_bytes_per_gpu=10 * 2**30,
        points=(BASELINE, recommended, TOO_FAR, REFUSING),
        front=(BASELINE, recommended, TOO_FAR),
        recommended=recommended,
        kv_budgets=(
            KvBudgetRow(0.9, kv_budget_bytes, waited=3, status_429=1, peak_inflight_bytes=2**30),
        ),
        kv_budget_bytes=kv_budget_bytes,
        target_downscaled_fraction=0.1,
        notes=notes,
    )
